"""Adapter-written runs decoded for display (safepoint.frameworks): typed values as placeholders,
never revived; and ``safepoint show`` naming a LangGraph thread's channels, run as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import safepoint
from safepoint.frameworks import framework_view, shown_value
from safepoint_exe import sp


def test_typed_values_are_placeholders_and_plain_values_json() -> None:
    assert shown_value({"a": [1, "x"]}) == '{\n  "a": [\n    1,\n    "x"\n  ]\n}'
    shown = shown_value({"$typed": ["msgpack", {"ext": 5, "data": ["os.system", "rm -rf /"]}]})
    assert "<msgpack value>" in shown
    assert "os.system" in shown  # shown as data, nothing imported or called
    assert shown_value({"$typed": ["bytes", "AAAA"]}) == '"<bytes, 4 stored>"'
    assert len(shown_value("x" * 10_000)) < 2_100


def test_plain_runs_have_no_framework_view() -> None:
    assert framework_view({"team": "a"}, {"values": {}}) is None
    view = framework_view({"safepoint.adapter": "langgraph", "langgraph.thread_id": "t"}, "not a dict")
    assert view is not None
    assert view.channels == []


def test_the_newer_adapters_runs_are_named_by_their_framework() -> None:
    labels = {"safepoint.adapter": "google-adk", "google_adk.app_name": "app", "google_adk.session_id": "s"}
    view = framework_view(labels, {"state": {"name": "Ada"}})
    assert view is not None
    assert view.framework == "Google ADK session"
    assert view.facts == [("app_name", "app"), ("session_id", "s")]
    assert view.channels == [("session state", '{\n  "name": "Ada"\n}')]
    for adapter, name in [("pydantic-ai", "Pydantic AI"), ("agent-framework", "Microsoft Agent Framework")]:
        shown = framework_view({"safepoint.adapter": adapter}, "not a dict")
        assert shown is not None
        assert shown.framework.startswith(name)


def test_the_framework_decoder_imports_no_framework() -> None:
    code = (
        "import sys, safepoint.frameworks, safepoint.cli.inspect\n"
        "bad = [m for m in ('langgraph', 'langchain_core', 'agents') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_safepoint_show_names_a_langgraph_threads_channels(tmp_path: Path) -> None:
    from langchain_core.messages import HumanMessage  # noqa: PLC0415

    from safepoint.adapters.langgraph import SafepointSaver  # noqa: PLC0415
    from test_adapter_langgraph import build_chat_graph  # noqa: PLC0415

    url = f"sqlite:///{tmp_path}/state.db"
    store = safepoint.open_store(url)
    graph = build_chat_graph(SafepointSaver(store), fan_out=True)
    graph.invoke(
        {"messages": [HumanMessage(content="hi")], "notes": ["first note"]},
        {"configurable": {"thread_id": "t1"}},
    )
    thread = next(r.run_id for r in store.runs().items if r.run_id.startswith("langgraph/"))
    store.close()
    shown = sp(tmp_path, "show", thread, "--store", url, columns=200)
    assert shown.returncode == 0, shown.stderr
    assert "LangGraph thread" in shown.stdout
    assert "channel notes" in shown.stdout
    assert "first note" in shown.stdout


def langgraph_store(tmp_path: Path, threads: int) -> str:
    from langchain_core.messages import HumanMessage  # noqa: PLC0415

    from safepoint.adapters.langgraph import SafepointSaver  # noqa: PLC0415
    from test_adapter_langgraph import build_chat_graph  # noqa: PLC0415

    url = f"sqlite:///{tmp_path}/state.db"
    store = safepoint.open_store(url)
    graph = build_chat_graph(SafepointSaver(store))
    for n in range(threads):
        graph.invoke(
            {"messages": [HumanMessage(content=f"hi {n}")]}, {"configurable": {"thread_id": f"t{n}"}}
        )
    store.save(safepoint.Checkpoint(run_id="mine"))
    store.close()
    return url


def test_safepoint_runs_leaves_the_adapters_index_runs_out_unless_asked(tmp_path: Path) -> None:
    import json  # noqa: PLC0415

    url = langgraph_store(tmp_path, 3)
    listed = sp(tmp_path, "runs", "--store", url, "--json")
    ids = [r["run_id"] for r in json.loads(listed.stdout)["runs"]]
    assert not [i for i in ids if i.startswith("langgraph-index/")]
    assert len([i for i in ids if i.startswith("langgraph/")]) == 3
    everything = json.loads(sp(tmp_path, "runs", "--store", url, "--all", "--json").stdout)["runs"]
    assert len([r for r in everything if r["run_id"].startswith("langgraph-index/")]) == 3
    paged: list[str] = []
    cursor: list[str] = []
    while True:  # a page at a time, the bookkeeping runs between them skipped: each user run once
        page = json.loads(sp(tmp_path, "runs", "--store", url, "--limit", "1", "--json", *cursor).stdout)
        paged += [r["run_id"] for r in page["runs"]]
        if page["next_cursor"] is None:
            break
        cursor = ["--cursor", page["next_cursor"]]
    assert sorted(paged) == sorted(ids)


def test_safepoint_show_of_a_thread_leads_with_its_framework(tmp_path: Path) -> None:
    url = langgraph_store(tmp_path, 1)
    shown = sp(tmp_path, "show", "langgraph/t0", "--store", url, columns=200)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.index("LangGraph thread") < shown.stdout.index("status")


def test_the_inspector_leaves_index_runs_out_unless_asked(tmp_path: Path) -> None:
    from starlette.testclient import TestClient  # noqa: PLC0415

    from safepoint.ui import create_app  # noqa: PLC0415

    url = langgraph_store(tmp_path, 2)
    with safepoint.open_store(url, read_only=True) as store:
        web = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
        assert "langgraph-index/" not in web.get("/").text
        assert "langgraph/t1" in web.get("/").text
        assert "langgraph-index/" in web.get("/?all=1").text
