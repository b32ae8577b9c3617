"""A real headless Chromium for the review-UI tests, with nothing allowed off 127.0.0.1.

Debian's ``chromium`` and ``chromium-driver`` (``make test`` installs them as root, like the
fonts) driven by Selenium through ``/usr/bin/chromedriver``, so Selenium Manager downloads
nothing (``SE_OFFLINE``). Every request to a host other than 127.0.0.1 goes to
:class:`RefusingProxy`, a proxy on 127.0.0.1 that records it and answers 403 (Chromium sends
loopback directly, everything else through ``--proxy-server``); name resolution is off for
every other host (``--host-resolver-rules``) and Chromium's own background traffic is
switched off as far as flags allow. The Label Studio frontend still tries its two trackers
(Google Tag Manager, labelstud.io): the tests assert that those and everything else off
127.0.0.1 were refused and that no response came from anywhere but 127.0.0.1.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT_S = 60


def require_browser() -> None:
    """Skip (with the reason) when the browser, its driver or Selenium is missing."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.is_file()]
    if missing:
        pytest.skip(f"{', '.join(missing)} missing: apt-get install -y chromium chromium-driver "
                    "(make test does it as root)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("selenium is not installed: pip install -e '.[dev]'")


class RefusingProxy:
    """An HTTP proxy on 127.0.0.1 that forwards nothing: every request (``CONNECT`` for
    https) is recorded as ``(method, target)`` and answered 403."""

    def __init__(self) -> None:
        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _refuse(self) -> None:
                seen.append((self.command, self.path))
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = do_HEAD = do_OPTIONS = do_CONNECT = _refuse

            def log_message(self, *args: object) -> None:
                pass

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def hosts(self) -> set[str]:
        """The hosts the browser tried to reach off 127.0.0.1."""
        return {urlsplit(t if "://" in t else f"//{t}").hostname or t for _, t in self.seen}


@contextmanager
def chromium(tmp_path: Path) -> Iterator[tuple[object, RefusingProxy]]:
    """A headless Chromium (Selenium WebDriver) and the proxy that refuses what leaves
    127.0.0.1; the profile lives in ``tmp_path``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not look anything up
    os.environ["SE_AVOID_STATS"] = "true"
    proxy = RefusingProxy()
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--window-size=1600,1200", f"--user-data-dir={tmp_path / 'profile'}",
        f"--proxy-server=http://127.0.0.1:{proxy.port}",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions", "--no-first-run", "--no-pings",
        "--disable-domain-reliability", "--disable-client-side-phishing-detection",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--disable-features=OptimizationHints,AutofillServerCommunication,"
        "PasswordLeakDetection,MediaRouter,Translate,CertificateTransparencyComponentUpdater",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=opts)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver, proxy
    finally:
        driver.quit()
        proxy.close()
        shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def responses_off_loopback(driver) -> list[str]:
    """URLs of every response the page received from a host other than 127.0.0.1 (read
    from Chromium's performance log; reading empties it). Refused proxy answers are not
    responses from the host and do not appear."""
    out = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") != "Network.responseReceived":
            continue
        url = msg["params"]["response"]["url"]
        host = urlsplit(url).hostname
        if urlsplit(url).scheme in ("http", "https", "ws", "wss") and host != "127.0.0.1":
            out.append(url)
    return out


def wait_for(driver, predicate, what: str, timeout: float = WAIT_S):
    """Poll ``predicate(driver)`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate(driver)
            if value:
                return value
        except Exception as exc:  # the page is still being built
            last_exc = exc
        time.sleep(0.3)
    keep = os.environ.get("XCM_BROWSER_ARTIFACTS")  # a folder for a screenshot of the failure
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(keep) / "failure.png"))
        (Path(keep) / "failure.html").write_text(driver.page_source, encoding="utf-8")
    raise AssertionError(f"timed out waiting for {what} ({last_exc!r}) on {driver.current_url}")


def logout(driver, base_url: str) -> None:
    """Log out whoever is logged in (the page's own requests may still set a session cookie
    after ``delete_all_cookies``: Label Studio sends one with every answer)."""
    driver.get(f"{base_url}/logout")  # returns once the page after the logout has loaded
    driver.delete_all_cookies()


def login(driver, base_url: str, email: str, password: str) -> None:
    """Log in through Label Studio's login form (after logging out any previous user)."""
    from selenium.webdriver.common.by import By

    logout(driver, base_url)
    driver.get(f"{base_url}/user/login/")
    wait_for(driver, lambda d: d.find_element(By.NAME, "email"), "the login form")
    driver.find_element(By.NAME, "email").send_keys(email)
    driver.find_element(By.NAME, "password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(driver, lambda d: "/user/login" not in d.current_url, f"{email} logged in")


def sign_up(driver, base_url: str, invite_path: str, email: str, password: str) -> None:
    """Join the organization through its invitation link, as an annotator does (sign-up
    without a link is disabled on the test server); the new account is logged in."""
    from selenium.webdriver.common.by import By

    logout(driver, base_url)
    driver.get(base_url + invite_path)
    wait_for(driver, lambda d: d.find_element(By.NAME, "email"), "the sign-up form")
    driver.find_element(By.NAME, "email").send_keys(email)
    driver.find_element(By.NAME, "password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "#signup-form button[type=submit]").click()
    wait_for(driver, lambda d: "/user/signup" not in d.current_url, f"{email} signed up")


class Accounts:
    """Annotator accounts of the test server, made on first use through the invitation link
    (Label Studio's API creates users without a password), logged in afterwards."""

    def __init__(self, base_url: str, invite_path: str):
        self.base_url, self.invite_path = base_url, invite_path
        self.passwords: dict[str, str] = {}

    def enter(self, driver, email: str) -> None:
        import secrets

        if email in self.passwords:
            login(driver, self.base_url, email, self.passwords[email])
        else:
            self.passwords[email] = secrets.token_urlsafe(12)
            sign_up(driver, self.base_url, self.invite_path, email, self.passwords[email])


def label_next(driver, base_url: str, project_id: int, on_instructions=None) -> str:
    """Open the project's label stream ("Label All Tasks": the next task this user has not
    answered, with a fresh annotation), close the instructions Label Studio shows first and
    wait until the task's Submit button is there; returns the instructions' text ('' when
    none showed). ``on_instructions(modal)`` is called with the instructions window open."""
    from selenium.webdriver.common.by import By

    driver.get(f"{base_url}/projects/{project_id}/data?labeling=1")
    seen: list[str] = []

    def ready(d):
        modal = next((m for m in d.find_elements(By.CSS_SELECTOR, ".lsf-modal-ls__content")
                      if m.is_displayed()), None)
        if modal is not None:
            seen.append(modal.text)
            if on_instructions is not None and len(seen) == 1:
                on_instructions(modal)
            modal.find_element(By.CSS_SELECTOR, "button[aria-label='Close modal']").click()
            return None
        return _submit(d)

    wait_for(driver, ready, "the task (its Submit button)")
    return seen[0] if seen else ""


def _submit(driver):
    from selenium.webdriver.common.by import By

    return next((b for b in driver.find_elements(By.TAG_NAME, "button")
                 if b.text.strip() == "Submit" and b.is_displayed()), None)


def submit_button(driver):
    return wait_for(driver, _submit, "the Submit button")


def click_text(driver, text: str, index: int = 0) -> None:
    """Click the ``index``-th visible element whose own text is exactly ``text``."""
    from selenium.webdriver.common.by import By

    def find(d):
        els = [e for e in d.find_elements(By.XPATH, f"//*[normalize-space(text())={_xq(text)}]")
               if e.is_displayed()]
        return els[index] if len(els) > index else None

    wait_for(driver, find, f"{text!r} #{index}").click()


def _xq(text: str) -> str:
    return f'"{text}"' if '"' not in text else f"'{text}'"


def submit(driver, client, task_id: int, n_before: int) -> None:
    """Press Submit and wait until the server holds one more annotation of the task."""
    submit_button(driver).click()
    wait_for(driver, lambda d: len(client.annotations.list(id=task_id)) > n_before,
             f"the annotation of task {task_id} stored")


INSTRUCTIONS_JS = """
const m = arguments[0];
const px = (v) => parseFloat(v);
const heads = [...m.querySelectorAll('h1, h2, h3')].map((h) => {
  const cs = getComputedStyle(h), r = h.getBoundingClientRect();
  const next = h.nextElementSibling;
  return {text: h.textContent, font: px(cs.fontSize), line: px(cs.lineHeight),
          height: r.height, bottom: r.bottom,
          next_top: next ? next.getBoundingClientRect().top : null};
});
const styles = (sel, prop) => [...new Set([...m.querySelectorAll(sel)].map(
  (e) => getComputedStyle(e)[prop]))].sort();
return {ol_items: m.querySelectorAll('ol > li').length, ul_items: m.querySelectorAll('ul > li').length,
        ol_style: styles('ol', 'listStyleType'), ul_style: styles('ul', 'listStyleType'),
        li_display: styles('li', 'display'), headings: heads};
"""


def instructions_layout(driver, modal) -> dict:
    """How the instructions window renders its lists and headings (computed styles, boxes)."""
    return driver.execute_script(INSTRUCTIONS_JS, modal)


def boxes_in_view(driver, css: str) -> list[dict]:
    """The visible elements matching ``css`` with their box and whether it lies wholly in
    the viewport (nothing scrolled)."""
    return driver.execute_script("""
      const W = window.innerWidth, H = window.innerHeight;
      return [...document.querySelectorAll(arguments[0])].filter((e) => e.offsetParent !== null)
        .map((e) => { const r = e.getBoundingClientRect();
          return {top: r.top, bottom: r.bottom, left: r.left, right: r.right,
                  inside: r.top >= 0 && r.left >= 0 && r.bottom <= H && r.right <= W}; });
    """, css)


def shot(driver, name: str) -> None:
    """A screenshot for the docs, into ``$XCM_DOCS_IMG/<name>.png`` when that is set (the
    manual's pictures are made this way: XCM_DOCS_IMG=docs/img)."""
    folder = os.environ.get("XCM_DOCS_IMG")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / f"{name}.png"))


def warning_text(driver) -> str:
    """The text of the warning window Label Studio shows (e.g. a required answer missing),
    '' when none is open."""
    from selenium.webdriver.common.by import By

    return " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, ".ant-modal-confirm")
                    if e.is_displayed())
