#!/usr/bin/env python3
"""A scripted browser for demos and CLI tests: `BROWSER="python3 tools/idp/headless_browser.py" moose login ...`.

Given the authorization URL, it signs in to the test IdP as MOOSE_IDP_USER / MOOSE_IDP_PASSWORD
(default alice / wonderland-42) through the provider's own login form (cookies + CSRF token), follows
the redirects, and finally requests the app's loopback redirect URI, as a real browser would.
With MOOSE_BROWSER_PRINT_REDIRECT=1 it prints that final address instead of requesting it (a browser on
another machine, whose address bar a person copies: `moose login --paste`).
Test support only — Moose itself never contains this.
"""
import html.parser
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class FormParser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.action, self.fields, self.in_form, self.done = None, [], False, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and not self.done:
            self.in_form, self.action = True, attrs.get("action") or ""
        elif self.in_form and tag == "input" and attrs.get("name"):
            self.fields.append((attrs["name"], attrs.get("value") or ""))  # html.parser unescapes values

    def handle_endtag(self, tag):
        if tag == "form" and self.in_form:
            self.in_form, self.done = False, True


def main():
    url = sys.argv[-1]
    redirect_uri = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get("redirect_uri", [""])[0]
    user = os.environ.get("MOOSE_IDP_USER", "alice")
    password = os.environ.get("MOOSE_IDP_PASSWORD", "wonderland-42")
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()), NoRedirect)
    data = None
    for _ in range(12):
        if redirect_uri and url.startswith(redirect_uri):
            if os.environ.get("MOOSE_BROWSER_PRINT_REDIRECT") == "1":
                print(url, flush=True)
                return 0
            urllib.request.urlopen(url, timeout=10).read()  # deliver the callback to the app
            return 0
        try:
            response = opener.open(urllib.request.Request(url, data=data), timeout=10)
            status, headers, body = response.status, response.headers, response.read().decode()
        except urllib.error.HTTPError as error:
            status, headers, body = error.code, error.headers, error.read().decode()
        data = None
        if 300 <= status < 400:
            url = urllib.parse.urljoin(url, headers["Location"])
            continue
        form = FormParser()
        form.feed(body)
        if status != 200 or form.action is None:
            print(f"headless browser: HTTP {status} at {url} with no form", file=sys.stderr)
            return 1
        fields = [(k, user if k == "username" else password if k == "password" else v) for k, v in form.fields]
        url = urllib.parse.urljoin(url, form.action or url)
        data = urllib.parse.urlencode(fields).encode()
    print("headless browser: too many steps", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
