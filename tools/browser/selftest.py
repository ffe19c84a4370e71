#!/usr/bin/env python3
"""Checks tools/browser against a running test IdP, with a tiny loopback listener standing in for moose.

    tools/browser/selftest.py ISSUER          # e.g. http://127.0.0.1:8791 (from tools/idp/start)

1. login: authorization code + PKCE as client moose-browser (consent page shown) through
   chromium.sh; the listener serves an HTML page with a <title>; the code is exchanged for tokens.
2. device: a device authorization as moose-device, then chromium_login.py --device URI CODE; polls for tokens.
3. page: chromium_login.py --page on the listener's error page (HTTP 400).
4. timeout: --page on a listener that never answers, MOOSE_BROWSER_TIMEOUT=3: must exit 1 quickly.
Prints one line per check with its time, and 'N passed, N failed'. Exit 0 when all pass.
"""
import base64
import hashlib
import http.server
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
WRAPPER = os.path.join(HERE, "chromium.sh")


class Listener(http.server.ThreadingHTTPServer):
    """127.0.0.1:random: /callback answers a page with a <title> and records the query; /error answers 400."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.callbacks = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def base(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/callback":
            self.server.callbacks.append(dict(urllib.parse.parse_qsl(url.query)))
            self.reply(200, "Moose — signed in", "<h1>Signed in</h1><p>You can close this window and go back to the terminal.</p>")
        elif url.path == "/error":
            self.reply(400, "Moose — sign-in failed", "<h1>Sign-in failed</h1><p>access_denied: the user said no.</p>")
        else:
            self.reply(404, "Not found", "<p>Not found</p>")

    def reply(self, status, title, body):
        page = f"<!doctype html><html><head><meta charset=utf-8><title>{title}</title></head><body>{body}</body></html>".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args):
        pass


def post(url, fields):
    request = urllib.request.Request(url, data=urllib.parse.urlencode(fields).encode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def run_browser(args, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    started = time.monotonic()
    done = subprocess.run([WRAPPER, *args], capture_output=True, text=True, env=env, timeout=120)
    return done, time.monotonic() - started


def check_login(issuer, metadata, shots):
    listener = Listener()
    redirect_uri = listener.base + "/callback"
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    state = secrets.token_urlsafe(16)
    url = metadata["authorization_endpoint"] + "?" + urllib.parse.urlencode({
        "response_type": "code", "client_id": "moose-browser", "redirect_uri": redirect_uri,
        "scope": "openid profile email", "state": state, "code_challenge": challenge,
        "code_challenge_method": "S256", "nonce": secrets.token_urlsafe(8)})
    result_file = os.path.join(shots, "result.jsonl")
    done, seconds = run_browser([url], {"MOOSE_SCREENSHOT_DIR": shots, "MOOSE_SCREENSHOT_STEPS": "1",
                                        "MOOSE_BROWSER_RESULT": result_file})
    listener.shutdown()
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr.strip()}"
    page = json.loads(done.stdout)
    assert page["title"] == "Moose — signed in", page
    assert "go back to the terminal" in page["text"], page
    assert page["url"].startswith(redirect_uri) and page["status"] == 200, page
    assert os.path.getsize(os.path.join(shots, "callback.png")) > 1000
    assert json.loads(open(result_file).read().splitlines()[-1]) == page
    assert len(listener.callbacks) == 1 and listener.callbacks[0]["state"] == state, listener.callbacks
    status, tokens = post(metadata["token_endpoint"], {
        "grant_type": "authorization_code", "code": listener.callbacks[0]["code"], "redirect_uri": redirect_uri,
        "client_id": "moose-browser", "code_verifier": verifier})
    assert status == 200 and "id_token" in tokens, (status, tokens)
    return seconds, sorted(os.listdir(shots))


def check_device(issuer, metadata, shots):
    status, device = post(metadata.get("device_authorization_endpoint", issuer + "/device-authorization/"),
                          {"client_id": "moose-device", "scope": "openid"})
    assert status == 200, device
    uri = device.get("verification_uri_complete") or device["verification_uri"]
    done, seconds = run_browser(["--device", uri, device["user_code"]], {"MOOSE_SCREENSHOT_DIR": shots})
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr.strip()}"
    page = json.loads(done.stdout)
    assert "Authorized" in page["text"], page
    status, tokens = post(metadata["token_endpoint"], {
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": device["device_code"],
        "client_id": "moose-device"})
    assert status == 200 and "access_token" in tokens, (status, tokens)
    return seconds, page["text"].strip()


def check_page(shots):
    listener = Listener()
    done, seconds = run_browser(["--page", listener.base + "/error?error=access_denied"], {"MOOSE_SCREENSHOT_DIR": shots})
    listener.shutdown()
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr.strip()}"
    page = json.loads(done.stdout)
    assert page["title"] == "Moose — sign-in failed" and page["status"] == 400, page
    assert os.path.exists(os.path.join(shots, "error.png"))
    return seconds, page["text"].strip()


def check_timeout():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts (in the kernel) and never answers
    port = silent.getsockname()[1]
    done, seconds = run_browser(["--page", f"http://127.0.0.1:{port}/callback"], {"MOOSE_BROWSER_TIMEOUT": "3"})
    silent.close()
    assert done.returncode == 1 and "timed out" in done.stderr and not done.stdout, (done.returncode, done.stdout, done.stderr)
    assert seconds < 8, seconds
    return seconds, done.stderr.strip().splitlines()[-1]


def main():
    issuer = (sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8765").rstrip("/")
    with urllib.request.urlopen(issuer + "/.well-known/openid-configuration", timeout=5) as response:
        metadata = json.load(response)
    shots = os.environ.get("MOOSE_SCREENSHOT_DIR") or tempfile.mkdtemp(prefix="moose-browser-shots-")
    passed = failed = 0
    checks = [("login", lambda: check_login(issuer, metadata, shots)),
              ("login again", lambda: check_login(issuer, metadata, shots)),
              ("device", lambda: check_device(issuer, metadata, shots)),
              ("page", lambda: check_page(shots)),
              ("timeout", check_timeout)]
    for name, check in checks:
        try:
            seconds, detail = check()
            print(f"ok   {name} ({seconds:.2f} s): {detail}")
            passed += 1
        except Exception as error:  # noqa: BLE001 — report every check
            print(f"FAIL {name}: {type(error).__name__}: {error}")
            failed += 1
    print(f"screenshots in {shots}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
