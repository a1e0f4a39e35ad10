"""Code hosting: GitHub and GitLab tokens, found by their documented prefixes."""

from __future__ import annotations

from safepoint.scrub.engine.rule import Rule

from .parts import DASHED_END, DASHED_START, TOKEN_END, TOKEN_START, prefixed

RULES: tuple[Rule, ...] = (
    prefixed(
        "github-token",
        TOKEN_START + r"gh[pousr]_[A-Za-z0-9]{36,251}" + TOKEN_END,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        "GitHub token: ghp_ classic PAT, gho_ OAuth, ghu_ user-to-server, ghs_ server-to-server, "
        "ghr_ refresh + base62",
    ),
    prefixed(
        "github-fine-grained-token",
        TOKEN_START + r"github_pat_[A-Za-z0-9_]{70,240}" + TOKEN_END,
        ("github_pat_",),
        "GitHub fine-grained personal access token: github_pat_ + 22 + _ + 59 base62 characters",
    ),
    prefixed(
        "gitlab-token",
        DASHED_START
        + r"(?:gl(?:pat|oas|dt|rt|rtr|cbt|ptt|ft|imt|agent|soat|ffct|wt)-[A-Za-z0-9_-]{20,200}"
        + r"(?:\.[A-Za-z0-9_-]{2,40}){0,3}|GR1348941[A-Za-z0-9_-]{20,60})"
        + DASHED_END,
        (
            *(
                f"gl{p}-"
                for p in ("pat", "oas", "dt", "rt", "rtr", "cbt", "ptt", "ft", "imt", "agent", "soat")
            ),
            *("glffct-", "glwt-", "GR1348941"),
        ),
        "GitLab token: glpat- personal, gloas- OAuth secret, gldt- deploy, glrt- runner, glcbt- job, "
        "glptt- trigger, glft- feed, … and GR1348941 runner registration",
        max_length=400,
    ),
)
