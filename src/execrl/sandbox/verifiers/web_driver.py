"""The `web` verifier's driver: opens a site in headless Chromium, in the sandbox, and writes
down what it saw (`web.json`, one screenshot per page). It decides nothing: the parent compares.

Shipped into the run as `driver.py` and run by the sandbox's interpreter isolated (-I), so it
imports only the standard library and Playwright (which drives the system's Chromium, whose
path is in the plan; no browser is downloaded). Input: the site's files under `site/`, the plan
(`plan.json`: pages, selectors, actions; no expected value), a key on stdin that the result
carries back, so that no file the page could have made passes for it (the page has no file
system; downloads are refused anyway).

Confinement, beside the sandbox's own (no network namespace interfaces, the run's uid, its
scratch, its time limit): every request goes through one route that serves the files of
`site/` on a made-up origin and aborts everything else (other origins, other schemes' loads,
paths outside the site); service workers are blocked; Chromium's profile is under the scratch;
each process's committed memory is bounded by RLIMIT_DATA (address space cannot be: Chromium's
V8 and Oilpan cages reserve tens of GiB they never touch, so the run's RLIMIT_AS is set high);
one renderer; a JavaScript heap cap. The driver makes itself the subreaper of everything it
starts and kills every descendant before it exits, whatever happened; a watchdog does the same
at the deadline.
"""

import ctypes
import json
import os
import posixpath
import resource
import signal
import sys
import threading
import time
from urllib.parse import unquote, urlsplit

DATA_BYTES = 768 << 20  # committed memory of each process (RLIMIT_DATA)
ACTION_MS = 2000  # each click, fill, query
LOAD_MS = 5000  # each page load
PR_SET_CHILD_SUBREAPER = 36
TYPES = {
    ".html": "text/html",
    ".css": "text/css",
    ".js": "text/javascript",
    ".svg": "image/svg+xml",
    ".json": "application/json",
    ".txt": "text/plain",
}
QUERIES = {
    "text": "els => els.length ? els[0].innerText : null",
    "value": "els => els.length && 'value' in els[0] ? String(els[0].value) : null",
    "texts": "els => els.map(e => e.innerText)",
    "count": "els => els.length",
    "checked": "els => els.length ? Boolean(els[0].checked) : null",
}


def descendants():
    """Pids of every process below this one (orphans come back to it: it is their subreaper)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read().decode(errors="replace")
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def kill_descendants():
    for _ in range(20):
        pids = descendants()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.05)


class Site:
    """The files of `site/`, served on the plan's origin; every other request is aborted and noted."""

    def __init__(self, root, origin):
        self.origin = origin
        self.files = {}
        for top, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(top, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    with open(path, "rb") as f:
                        self.files[os.path.relpath(path, root).replace(os.sep, "/")] = f.read()
        self.failed = []

    def handle(self, route):
        url = route.request.url
        parts = urlsplit(url)
        path = posixpath.normpath(unquote(parts.path)).lstrip("/") or "index.html"
        local = f"{parts.scheme}://{parts.netloc}" == self.origin
        if local and path in self.files:
            kind = TYPES.get(posixpath.splitext(path)[1], "application/octet-stream")
            route.fulfill(status=200, body=self.files[path], headers={"content-type": kind})
            return
        if path != "favicon.ico":
            self.failed.append(url)
        if local:
            route.fulfill(status=404, body=b"not found", headers={"content-type": "text/plain"})
        else:
            route.abort("blockedbyclient")


def settle(page):
    """Let the handlers an action started and the next frame run."""
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))")


def act(page, action):
    target = page.locator(action["selector"]).first
    do, text = action["do"], action["text"]
    if do == "click":
        target.click(timeout=ACTION_MS)
    elif do == "fill":
        target.fill(text, timeout=ACTION_MS)
    elif do == "press":
        target.press(text, timeout=ACTION_MS)
    elif do == "check":
        target.check(timeout=ACTION_MS)
    elif do == "select":
        target.select_option(text, timeout=ACTION_MS)
    page.wait_for_load_state("load", timeout=LOAD_MS)
    settle(page)


def query(page, q):
    if q["what"] == "url":
        return posixpath.normpath(urlsplit(page.url).path).lstrip("/") or "index.html"
    if q["what"] == "visible":
        return page.locator(q["selector"]).first.is_visible(timeout=ACTION_MS)
    return page.locator(q["selector"]).evaluate_all(QUERIES[q["what"]])


def visit(context, origin, path, index, out):
    """Load one page: its status, the links on it, its element counts, a screenshot."""
    page = context.new_page()
    record = {"path": path, "status": 0, "error": "", "links": []}
    try:
        response = page.goto(f"{origin}/{path}", wait_until="load", timeout=LOAD_MS)
        record["status"] = response.status if response is not None else 0
        settle(page)
        record["links"] = page.eval_on_selector_all("a[href]", "els => els.map(a => a.href)")
        page.screenshot(path=f"shot-{index}.png", animations="disabled", caret="hide")
    except Exception as exc:  # a page that hangs or crashes the renderer: noted, not raised
        record["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    out["pages"].append(record)
    return page


def run_scenario(context, origin, scenario):
    page = context.new_page()
    values = []
    try:
        page.goto(f"{origin}/{scenario['page']}", wait_until="load", timeout=LOAD_MS)
        settle(page)
        for action in scenario["actions"]:
            act(page, action)
        for q in scenario["queries"]:
            values.append(query(page, q))
        return {"values": values, "error": ""}
    except Exception as exc:
        return {
            "values": values,
            "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
        }
    finally:
        page.close()


def drive(plan, out):
    from playwright.sync_api import sync_playwright

    site = Site("site", plan["origin"])
    out["failed"] = site.failed  # the same list: what the deadline writes has it too
    width, height = plan["viewport"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=plan["chromium"],
            args=[
                "--no-sandbox",  # Chromium's own sandbox needs namespaces the run has not
                "--disable-dev-shm-usage",
                "--disable-gpu",
                "--no-zygote",
                "--renderer-process-limit=1",
                "--js-flags=--max-old-space-size=256",
                "--execrl-web-run",  # a mark tests find leftover processes by
            ],
            env={**os.environ, "HOME": os.path.abspath("home")},
            timeout=LOAD_MS * 3,
        )

        def new_context():
            context = browser.new_context(
                viewport={"width": width, "height": height},
                accept_downloads=False,
                service_workers="block",
                java_script_enabled=True,
            )
            context.route("**/*", site.handle)
            context.on("weberror", lambda e: out["js_errors"].append(str(e.error)[:300]))
            return context

        context = new_context()
        pages = [visit(context, plan["origin"], p, i, out) for i, p in enumerate(plan["pages"])]
        loaded = {p: pg for p, pg in zip(plan["pages"], pages, strict=True)}
        for e in plan["elements"]:
            page = loaded.get(e["page"])
            try:
                count = page.locator(e["selector"]).count() if page is not None else -1
            except Exception:
                count = -1
            out["elements"].append(count)
        context.close()
        for scenario in plan["scenarios"]:
            context = new_context()
            out["scenarios"].append(run_scenario(context, plan["origin"], scenario))
            context.close()
        browser.close()


def main():
    key = sys.stdin.readline().strip()
    with open("plan.json", encoding="utf-8") as f:
        plan = json.load(f)
    resource.setrlimit(resource.RLIMIT_DATA, (DATA_BYTES, DATA_BYTES))
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    out = {"key": key, "pages": [], "elements": [], "scenarios": [], "failed": [], "js_errors": []}

    def finish(status):
        out["status"] = status
        with open("web.json", "w", encoding="utf-8") as f:
            json.dump(out, f)
        kill_descendants()
        os._exit(0)

    deadline = threading.Timer(plan["deadline_s"], lambda: finish("deadline"))
    deadline.daemon = True
    deadline.start()
    try:
        drive(plan, out)
        status = "ok"
    except Exception as exc:
        status = (
            f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        )
    deadline.cancel()
    finish(status)


if __name__ == "__main__":
    main()
