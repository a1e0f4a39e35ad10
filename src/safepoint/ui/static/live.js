// safepoint ui: the live parts of two pages, by polling (no inline script: the CSP forbids it).
// A run page asks for its head every second; when a new checkpoint is there it fetches the page
// again and swaps in the parts that changed (the server escaped them, as on any page load).
// The verify page polls its progress while a verification runs.
"use strict";

const POLL_MS = 1000;

function swap(fresh, id) {
  const now = document.getElementById(id);
  const next = fresh.getElementById(id);
  if (now && next) now.replaceWith(document.importNode(next, true));
}

async function refreshRun(live) {
  try {
    const head = await fetch(live.dataset.head, { headers: { Accept: "application/json" } });
    if (!head.ok) return;
    const { step } = await head.json();
    if (String(step) === live.dataset.step) return;
    const page = await fetch(window.location.href);
    if (!page.ok) return;
    const fresh = new DOMParser().parseFromString(await page.text(), "text/html");
    for (const id of ["live", "steps", "charts", "question", "pending"]) swap(fresh, id);
  } catch (_) {
    // the server went away for a moment: the next poll tries again
  }
}

async function refreshVerify(box) {
  const answer = await fetch(box.dataset.poll, { headers: { Accept: "application/json" } });
  if (!answer.ok) return;
  const progress = await answer.json();
  document.getElementById("verify-done").textContent = progress.done;
  document.getElementById("verify-runs").textContent = progress.runs;
  document.getElementById("verify-checked").textContent = progress.checked;
  document.getElementById("verify-failed").textContent = progress.failures.length;
  const list = document.getElementById("verify-failures");
  list.replaceChildren(...progress.failures.map(([run, step, text]) => {
    const item = document.createElement("li");
    item.textContent = `${run} step ${step}: ${text}`; // text, never markup
    return item;
  }));
  if (!progress.running) box.dataset.running = "no";
}

document.addEventListener("DOMContentLoaded", () => {
  setInterval(() => {
    const live = document.getElementById("live");
    if (live) refreshRun(live);
    const box = document.getElementById("verify-progress");
    if (box && box.dataset.running === "yes") refreshVerify(box);
  }, POLL_MS);
});
