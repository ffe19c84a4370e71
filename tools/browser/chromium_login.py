#!/usr/bin/env python3
"""A real browser for Moose's tests: headless Chromium (Debian's chromium + chromium-driver) driven by selenium.

    chromium_login.py URL                                  # $BROWSER for `moose login`: sign in, consent, loopback page
    chromium_login.py --device VERIFICATION_URI [USER_CODE]  # device flow: sign in, enter the code, accept
    chromium_login.py --page URL                           # only load URL (e.g. a page Moose serves)

Run it through tools/browser/chromium.sh (or the python that tools/browser/setup prints). Signs in on
django-oauth-toolkit's own pages as MOOSE_IDP_USER / MOOSE_IDP_PASSWORD (default alice / wonderland-42),
approves its consent page ("Authorize", or "Accept" for a device) when shown, and waits until the last
page has loaded. Then it prints one JSON line {"url", "title", "text", "status"} on stdout (text is
document.body.innerText; status is the HTTP status of the last page, when Chromium knows it), also
appends it to $MOOSE_BROWSER_RESULT if set (moose sends $BROWSER's stdout to /dev/null), saves a PNG to
$MOOSE_SCREENSHOT_DIR if set (named from the page's path: /callback -> callback.png), and exits 0.
With MOOSE_SCREENSHOT_STEPS=1 every page on the way is saved too (01-accounts-login.png, …).
Any failure, or MOOSE_BROWSER_TIMEOUT seconds (default 90) in all, exits 1 with a message on stderr.
Test support only — Moose itself never contains this.
"""
import ctypes
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import urllib.parse

os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager look for (or download) a driver or browser

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

CHROMEDRIVER = "/usr/bin/chromedriver"
# The real binary, not Debian's /usr/bin/chromium shell wrapper (which only adds desktop flags).
CHROMIUM = next((p for p in ("/usr/lib/chromium/chromium", "/usr/bin/chromium") if os.path.exists(p)), "/usr/bin/chromium")
FLAGS = [
    "--headless=new",            # the real browser without a display
    "--no-sandbox",              # needed: we run as root, and Chromium refuses its sandbox for root
    "--disable-dev-shm-usage",   # /dev/shm may be small in containers
    "--disable-gpu",
    "--no-proxy-server",         # loopback and the IdP are always direct
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-background-networking",  # no internet: no update, safe-browsing or metrics traffic
    "--disable-component-update",
    "--disable-sync",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
    "--password-store=basic",
    "--window-size=1024,768",
] + os.environ.get("MOOSE_CHROMIUM_FLAGS", "").split()

STATUS_JS = ("var e = performance.getEntriesByType('navigation')[0];"
             "return e && e.responseStatus ? e.responseStatus : null;")


class Failure(Exception):
    pass


class Timeout(BaseException):  # not an Exception: no library's `except Exception` may swallow it
    pass


def log(message):
    print(f"chromium_login: {message}", file=sys.stderr, flush=True)


def on_alarm(*_):
    raise Timeout(f"timed out after {TIMEOUT:g} s (MOOSE_BROWSER_TIMEOUT)")


def on_term(*_):
    raise Timeout("terminated (SIGTERM)")


# 90 s: in the first minute of a test run on 2 cores, Chromium's start alone took over 30 s (a page
# render from a loopback listener then timed out with nothing printed).
TIMEOUT = float(os.environ.get("MOOSE_BROWSER_TIMEOUT") or 90)
USER = os.environ.get("MOOSE_IDP_USER", "alice")
PASSWORD = os.environ.get("MOOSE_IDP_PASSWORD", "wonderland-42")
SHOT_DIR = os.environ.get("MOOSE_SCREENSHOT_DIR") or None
SHOT_STEPS = os.environ.get("MOOSE_SCREENSHOT_STEPS") == "1"


def become_subreaper():
    """Chromium's helpers (crashpad, zygote) outlive their parent; as subreaper we inherit and reap them."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def reap_descendants(limit=2.0):
    """Kills and reaps every process left under us (all of them are Chromium's or chromedriver's)."""
    me, deadline = os.getpid(), time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return  # no children left
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == me and fields[0] != "Z":
                    os.kill(int(entry), signal.SIGKILL)
            except (OSError, ValueError, IndexError):
                pass
        time.sleep(0.05)


def page_name(url):
    parts = [p for p in urllib.parse.urlsplit(url).path.split("/") if p]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(parts)) or "index"
    return name[:120]


class Browser:
    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="moose-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in FLAGS + [f"--user-data-dir={self.profile}"]:
            options.add_argument(flag)
        options.page_load_strategy = "normal"
        # chromedriver (and so Chromium under it) in a session of its own: one killpg ends them all.
        self.service = Service(executable_path=CHROMEDRIVER, popen_kw={"start_new_session": True})
        self.options = options
        self.driver = None
        self.step = 0

    def start(self):
        self.driver = webdriver.Chrome(options=self.options, service=self.service)
        self.driver.set_page_load_timeout(TIMEOUT)

    def close(self):
        if self.driver is not None:
            try:
                self.driver.quit()
            except Exception:
                pass
        process = getattr(self.service, "process", None)
        if process is not None:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # whatever quit() left behind
            except (ProcessLookupError, PermissionError):
                pass
        reap_descendants()
        shutil.rmtree(self.profile, ignore_errors=True)

    # -- the page -----------------------------------------------------------------------------------
    def loaded(self):
        try:
            return self.driver.execute_script("return document.readyState") == "complete"
        except WebDriverException:
            return False

    def wait_loaded(self):
        while not self.loaded():
            time.sleep(0.05)

    def location(self):
        """The document's own URL: chrome-error://chromewebdata/ for a page that could not load."""
        return self.driver.execute_script("return location.href")

    def check_not_error_page(self):
        if self.location().startswith("chrome-error:"):
            text = self.text().strip().replace("\n", " ")
            raise Failure(f"could not load {self.driver.current_url}: {text[:300]}")

    def text(self):
        return self.driver.execute_script("return document.body ? document.body.innerText : ''")

    def result(self):
        return {"url": self.driver.current_url, "title": self.driver.title, "text": self.text(),
                "status": self.driver.execute_script(STATUS_JS)}

    def screenshot(self, final):
        if not SHOT_DIR or not (final or SHOT_STEPS):
            return
        os.makedirs(SHOT_DIR, exist_ok=True)
        name = page_name(self.driver.current_url)
        if not final:
            self.step += 1
            name = f"{self.step:02d}-{name}"
        path = os.path.join(SHOT_DIR, name + ".png")
        if not self.driver.save_screenshot(path):
            raise Failure(f"could not save the screenshot {path}")

    def find(self, css):
        found = self.driver.find_elements(By.CSS_SELECTOR, css)
        return found[0] if found else None

    def submit(self, button):
        """Clicks a submit button and waits until the next document has replaced this one."""
        html = self.driver.find_element(By.TAG_NAME, "html")
        button.click()
        while True:
            try:
                html.is_enabled()  # raises StaleElementReferenceException once the page is replaced
            except WebDriverException:
                break
            time.sleep(0.05)
        self.wait_loaded()


def drive(browser, start_url, done, user_code=None):
    """Walks the IdP's pages until done(browser) holds, acting on each page it recognises."""
    driver = browser.driver
    driver.get(start_url)
    signed_in = entered_code = False
    idle_since = None
    while True:
        browser.wait_loaded()
        browser.check_not_error_page()
        if done(browser):
            return
        password = browser.find("input[name=password]")
        allow = browser.find("input[name=allow]")  # django-oauth-toolkit's consent page: "Authorize"
        accept = browser.find("button[name=action][value=accept]")  # its device page: "Accept"
        code = browser.find("input[name=user_code]")
        acted = True
        if password is not None:
            if signed_in:
                raise Failure(f"the sign-in was rejected at {driver.current_url}: {browser.text().strip()[:300]}")
            browser.screenshot(final=False)
            username = browser.find("input[name=username]")
            username.clear()
            username.send_keys(USER)
            password.clear()
            password.send_keys(PASSWORD)
            log(f"signing in as {USER}")
            signed_in = True
            browser.submit(password.find_element(By.XPATH, "ancestor::form//*[@type='submit']"))
        elif allow is not None:
            browser.screenshot(final=False)
            log("approving the consent page (Authorize)")
            browser.submit(allow)
        elif accept is not None:
            browser.screenshot(final=False)
            log("approving the device (Accept)")
            browser.submit(accept)
        elif code is not None:
            if entered_code:
                raise Failure(f"the user code was rejected: {browser.text().strip()[:300]}")
            if user_code:
                code.clear()
                code.send_keys(user_code)
            elif not code.get_attribute("value"):
                raise Failure("the device page asks for a user code and none was given")
            browser.screenshot(final=False)
            log("entering the user code")
            entered_code = True
            browser.submit(code.find_element(By.XPATH, "ancestor::form//*[@type='submit']"))
        else:
            acted = False
        if acted:
            idle_since = None
            continue
        # A loaded page with nothing to do: give scripts a moment, then give up with what it says.
        idle_since = idle_since or time.monotonic()
        if time.monotonic() - idle_since > 2:
            raise Failure(f"stuck at {driver.current_url} ({driver.title}): {browser.text().strip()[:300]}")
        time.sleep(0.1)


def usage():
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        return usage()
    mode = "login"
    if argv[0] in ("--device", "--page"):
        mode, argv = argv[0][2:], argv[1:]
    if not argv or len(argv) > (2 if mode == "device" else 1 if mode == "page" else len(argv)):
        return usage()
    url = argv[0] if mode != "login" else argv[-1]  # as $BROWSER, the URL is the last argument
    user_code = argv[1] if mode == "device" and len(argv) > 1 else None
    if not urllib.parse.urlsplit(url).scheme:
        log(f"FAILED: not a URL: {url!r}")
        return 2

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_term)  # killed by the test: still close Chromium
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
    started = time.monotonic()
    become_subreaper()
    browser = None
    try:
        browser = Browser()
        browser.start()
        if mode == "page":
            browser.driver.get(url)
            browser.wait_loaded()
            browser.check_not_error_page()
        elif mode == "device":
            drive(browser, url, lambda b: "/device-grant-status/" in b.driver.current_url, user_code)
        else:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
            redirect_uri = query.get("redirect_uri", [""])[0]
            idp = urllib.parse.urlsplit(url)[:2]

            def at_app(b):
                current = b.driver.current_url
                if redirect_uri:
                    return current.startswith(redirect_uri)
                return urllib.parse.urlsplit(current)[:2] != idp  # no redirect_uri (PAR): left the IdP
            drive(browser, url, at_app)
        browser.screenshot(final=True)
        result = browser.result()
        signal.setitimer(signal.ITIMER_REAL, 0)
    except (Failure, Timeout) as error:
        signal.setitimer(signal.ITIMER_REAL, 0)
        log(f"FAILED: {error}")
        return 1
    except WebDriverException as error:
        signal.setitimer(signal.ITIMER_REAL, 0)
        log(f"FAILED: {type(error).__name__}: {(error.msg or str(error)).strip()[:500]}")
        return 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if browser is not None:
            browser.close()
    line = json.dumps(result, ensure_ascii=False)
    print(line, flush=True)
    if os.environ.get("MOOSE_BROWSER_RESULT"):
        with open(os.environ["MOOSE_BROWSER_RESULT"], "a", encoding="utf-8") as out:
            out.write(line + "\n")
    log(f"{mode} done in {time.monotonic() - started:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
