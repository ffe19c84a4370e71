#!/usr/bin/env python3
"""Headless "browser" for the Glewlwyd test IdP (stdlib only); usable as $BROWSER.

    browser.py AUTHORIZATION_URL
        Follows the authorization request (plain or PAR: client_id + request_uri) to Glewlwyd's login page
        redirect, logs in through its REST API (POST /api/auth/), grants the requested scopes to the client
        (PUT /api/auth/grant/<client_id>), repeats the authorization request with `g_continue`, and delivers
        the final redirect (code, state, iss ... or error) with an HTTP GET to the client's redirect URI
        (the loopback listener of the client under test). response_mode=form_post is submitted as a POST.

    browser.py END_SESSION_URL   (.../end_session?id_token_hint=...&post_logout_redirect_uri=...&state=...)
        Does what Glewlwyd's JavaScript logout page does: logs in, ends the OIDC session
        (DELETE /api/<plugin>/session/<sid>), logs out (DELETE /api/auth/) and delivers the redirect to the
        post_logout_redirect_uri (only when it is registered for the client; otherwise prints "logged-out").

    browser.py --device VERIFICATION_URI [USER_CODE]
        Approves a device authorization: opens VERIFICATION_URI?code=USER_CODE (or verification_uri_complete
        as given), logs in, grants the scopes and confirms. Exits 0 when Glewlwyd reports deviceComplete.

Environment: MOOSE_GLEWLWYD_USER (default alice), MOOSE_GLEWLWYD_PASSWORD (default wonderland-42).
(Glewlwyd's login page has no "deny" that returns access_denied to the client, so neither has this driver;
grants are stored per user and client and persist across logins.)
Prints one line on stdout: the URL delivered to the client (or "deviceComplete"); diagnostics on stderr.
"""
import html.parser
import http.cookiejar
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class Browser:
    def __init__(self):
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirect())

    def request(self, method, url, body=None, content_type=None):
        req = urllib.request.Request(url, data=body, method=method)
        if content_type:
            req.add_header("Content-Type", content_type)
        try:
            with self.opener.open(req, timeout=15) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def get(self, url):
        return self.request("GET", url)

    def deliver(self, method, url, body=None, content_type=None):
        """The last hop, to the client's loopback redirect URI."""
        try:
            return self.request(method, url, body, content_type)[0]
        except urllib.error.URLError as e:
            print(url)
            die(f"could not deliver the response to the client at {url}: {e.reason}")


def log(*a):
    print("browser.py:", *a, file=sys.stderr)


def die(msg):
    log(msg)
    sys.exit(1)


def origin(url):
    p = urllib.parse.urlsplit(url)
    return f"{p.scheme}://{p.netloc}"


def with_param(url, name, value=None):
    p = urllib.parse.urlsplit(url)
    extra = name if value is None else urllib.parse.urlencode({name: value})
    query = f"{p.query}&{extra}" if p.query else extra
    return urllib.parse.urlunsplit((p.scheme, p.netloc, p.path, query, p.fragment))


def is_login_page(location):
    return urllib.parse.urlsplit(location).path.endswith("/login.html")


def login_and_grant(b, base, client_id, scope):
    user = os.environ.get("MOOSE_GLEWLWYD_USER", "alice")
    password = os.environ.get("MOOSE_GLEWLWYD_PASSWORD", "wonderland-42")
    status, _, body = b.request("POST", base + "/api/auth/", json.dumps({"username": user, "password": password}).encode(),
                                "application/json")
    if status != 200:
        die(f"login as {user!r} failed: {status} {body[:300]!r}")
    if client_id and scope:
        status, _, body = b.request("PUT", base + "/api/auth/grant/" + urllib.parse.quote(client_id, safe=""),
                                    json.dumps({"scope": scope}).encode(), "application/json")
        if status != 200:
            die(f"grant of {scope!r} to {client_id!r} failed: {status} {body[:300]!r}")


class FormParser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.action, self.fields = None, {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.action = a.get("action")
        elif tag == "input" and a.get("name"):
            self.fields[a["name"]] = a.get("value", "")


def deliver(b, status, headers, body):
    """Hands the authorization response to the client: redirect (query/fragment) or form_post."""
    if status in (301, 302, 303, 307) and headers.get("Location"):
        target = headers["Location"]
        if is_login_page(target):
            die(f"Glewlwyd sent the browser back to its login page: {target}")
        to_client = target.split("#", 1)[0]
        if "#" in target:  # fragment response mode: a browser would keep it client-side; send it as a query
            to_client = with_param(to_client, target.split("#", 1)[1])
        s = b.deliver("GET", to_client)
        log(f"delivered to the client: {s}")
        print(target)
        return
    if status == 200 and b"<form" in body:
        form = FormParser()
        form.feed(body.decode("utf-8", "replace"))
        if form.action:
            data = urllib.parse.urlencode(form.fields).encode()
            s = b.deliver("POST", form.action, data, "application/x-www-form-urlencoded")
            log(f"form_post delivered to the client: {s}")
            print(form.action + "?" + data.decode())
            return
    die(f"unexpected authorization response {status}: {body[:500]!r}")


def authorize(url):
    b = Browser()
    base = origin(url)
    status, headers, body = b.get(url)
    location = headers.get("Location", "")
    if urllib.parse.urlsplit(url).path.rstrip("/").endswith("/end_session"):
        return end_session(b, base, status, location)
    if status == 302 and is_login_page(location):
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
        client_id, scope, callback = q.get("client_id"), q.get("scope", ""), q.get("callback_url")
        if not callback:
            die(f"login page redirect without callback_url: {location}")
        login_and_grant(b, base, client_id, scope)
        status, headers, body = b.get(with_param(callback, "g_continue"))
    deliver(b, status, headers, body)


def end_session(b, base, status, location):
    if status != 302 or not is_login_page(location):
        die(f"unexpected end_session response {status} {location}")
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
    if q.get("prompt") != "end_session":
        die(f"end_session refused (prompt={q.get('prompt')}): the id_token_hint is unknown or no longer active")
    login_and_grant(b, base, None, None)
    plugin, sid = q["plugin"], q["sid"]
    s, _, body = b.request("DELETE", f"{base}/api/{plugin}/session/{urllib.parse.quote(sid, safe='')}")
    if s != 200:
        die(f"DELETE /api/{plugin}/session/{sid} failed: {s} {body[:300]!r}")
    b.request("DELETE", base + "/api/auth/")
    callback = q.get("callback_url")
    if callback:
        s = b.deliver("GET", callback)
        log(f"delivered to the client: {s}")
        print(callback)
    else:
        log("no (registered) post_logout_redirect_uri: nothing to deliver")
        print("logged-out")


def device(verification_uri, user_code):
    b = Browser()
    base = origin(verification_uri)
    url = with_param(verification_uri, "code", user_code) if user_code else verification_uri
    status, headers, body = b.get(url)
    location = headers.get("Location", "")
    if status != 302 or not is_login_page(location):
        die(f"unexpected device verification response {status} {location or body[:300]!r}")
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
    if q.get("prompt", "").startswith("device") and "callback_url" not in q:
        die(f"device verification refused: prompt={q.get('prompt')}")
    login_and_grant(b, base, q.get("client_id"), q.get("scope", ""))
    status, headers, body = b.get(with_param(q["callback_url"], "g_continue"))
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(headers.get("Location", "")).query))
    if q.get("prompt") != "deviceComplete":
        die(f"device approval failed: {status} {headers.get('Location') or body[:300]!r}")
    print("deviceComplete")


def main(argv):
    if len(argv) >= 3 and argv[1] == "--device":
        device(argv[2], argv[3] if len(argv) > 3 else None)
    elif len(argv) == 2 and not argv[1].startswith("-"):
        authorize(argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
