#!/usr/bin/env python3
"""A tiny $BROWSER stand-in for the moose CLI's tests: `BROWSER="python3 tools/hostile/browser.py" moose login ...`.

Fetches the URL (its last argument) and follows up to 5 `Location` redirects itself, so that it reaches
the client's loopback listener (http://127.0.0.1:<port>/callback?...). It never fetches a non-loopback
URL (nor a non-http(s) one), never uses a proxy, and gives up after 20 s in total. Prints nothing on
stdout; prints the final status and URL (or why it stopped) on stderr. Exit status: 0 when it reached a
non-redirect response, 1 when it stopped early, 2 on bad usage. Test support only.
"""
import ipaddress
import os
import signal
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

MAX_REDIRECTS = 5
DEADLINE_SECONDS = 20


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def is_loopback(url):
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    if parts.hostname.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


def say(message):
    print(f"browser.py: {message}", file=sys.stderr, flush=True)


def give_up(signum, frame):
    say(f"gave up after {DEADLINE_SECONDS} s")
    os._exit(1)


def main():
    if len(sys.argv) < 2:
        say("usage: browser.py URL")
        return 2
    if hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, give_up)
        signal.alarm(DEADLINE_SECONDS)  # a hard bound, whatever a server does (e.g. drips bytes)
    deadline = time.monotonic() + DEADLINE_SECONDS
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect)
    url = sys.argv[-1]
    for hop in range(MAX_REDIRECTS + 1):
        if not is_loopback(url):
            say(f"refusing non-loopback URL {url}")
            return 1
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            say(f"gave up after {DEADLINE_SECONDS} s at {url}")
            return 1
        try:
            with opener.open(url, timeout=max(0.1, remaining)) as response:
                status, location = response.status, response.headers.get("Location")
                response.read()
        except urllib.error.HTTPError as error:
            status, location = error.code, error.headers.get("Location")
            try:
                error.read()
            except OSError:
                pass
        except (OSError, ValueError) as error:
            say(f"error at {url}: {error}")
            return 1
        if 300 <= status < 400 and location:
            if hop == MAX_REDIRECTS:
                say(f"too many redirects; last {status} {url}")
                return 1
            url = urllib.parse.urljoin(url, location)
            continue
        say(f"{status} {url}")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
