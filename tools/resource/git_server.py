#!/usr/bin/env python3
"""A git smart-HTTP server (the real `git http-backend`, run as CGI) that needs a token the real test
IdP accepts (RFC 7662 introspection, see moose_resource.py) on every request:
`Authorization: Bearer <token>`, or HTTP Basic with any username and the token as the password (what a
git credential helper can give git 2.39, which has no way to send Bearer itself).

    python3 tools/resource/git_server.py --port 0 --issuer http://127.0.0.1:8765 [--root DIR]
    -> READY http://127.0.0.1:PORT        (exits when stdin closes, or on SIGTERM)

Serves every bare repository under the root: a temporary directory (removed on exit) unless --root
is given, with `repo.git` created there if missing (branch main, one commit with README.md) and
push allowed: git clone http://127.0.0.1:PORT/repo.git.
Missing or refused credentials: 401 with `WWW-Authenticate: Basic realm="moose"` and a Bearer
challenge (`Bearer realm="moose"`, or `Bearer error="invalid_token"` for a refused token).
GET /_test/stats (adds "git_requests": the last CGI calls and their status), POST /_test/reset.
"""
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moose_resource as mr  # noqa: E402

BACKEND = os.environ.get("MOOSE_GIT_HTTP_BACKEND", "")


def git_exec_path():
    return subprocess.run(["git", "--exec-path"], check=True, capture_output=True, text=True).stdout.strip()


def create_repo(path):
    """A bare repository with branch main holding one commit (README.md)."""
    env = dict(os.environ, GIT_AUTHOR_NAME="Moose Test", GIT_AUTHOR_EMAIL="moose@example.com",
               GIT_COMMITTER_NAME="Moose Test", GIT_COMMITTER_EMAIL="moose@example.com",
               GIT_AUTHOR_DATE="2026-01-01T00:00:00Z", GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
    git = lambda *args, **kw: subprocess.run(["git", f"--git-dir={path}", *args], check=True,
                                             capture_output=True, text=True, env=env, **kw).stdout.strip()
    subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", path], check=True, env=env)
    blob = git("hash-object", "-w", "--stdin", input="# Moose test repository\n")
    tree = git("mktree", input=f"100644 blob {blob}\tREADME.md\n")
    commit = git("commit-tree", tree, "-m", "Initial commit")
    git("update-ref", "refs/heads/main", commit)
    git("config", "http.receivepack", "true")


class GitApp(mr.App):
    name = "git"

    def __init__(self, args):
        super().__init__(args)
        self.root = None
        self.temp_dir = None
        self.backend = None
        self.log_lock = threading.Lock()
        self.git_requests = collections.deque(maxlen=200)

    def start(self):
        self.backend = BACKEND or os.path.join(git_exec_path(), "git-http-backend")
        if self.args.root:
            self.root = os.path.abspath(self.args.root)
            os.makedirs(self.root, exist_ok=True)
        else:
            self.root = self.temp_dir = tempfile.mkdtemp(prefix="moose-git-")
        if not os.path.exists(os.path.join(self.root, "repo.git")):
            create_repo(os.path.join(self.root, "repo.git"))

    def stop(self):
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def reset(self):
        with self.log_lock:
            self.git_requests.clear()

    def stats_extra(self):
        with self.log_lock:
            return {"root": self.root, "git_requests": list(self.git_requests)}


class GitHandler(mr.Handler):
    def challenges(self, error, **_):
        bearer = 'Bearer realm="moose"' if error is None else f'Bearer error="{error}"'
        return [("WWW-Authenticate", 'Basic realm="moose"'), ("WWW-Authenticate", bearer)]

    def route(self):
        body = self.read_body()
        info = self.authenticate(allow_basic=True, challenges=self.challenges,
                                 body_bytes=len(body) if body else None)
        if info is None:
            return
        parts = urllib.parse.urlsplit(self.path)
        user = info.get("username") or f"client:{info.get('client_id')}"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.app.root,
            "GIT_PROJECT_ROOT": self.app.root, "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1", "SERVER_PROTOCOL": "HTTP/1.1", "SERVER_SOFTWARE": "moose-git",
            "SERVER_NAME": "127.0.0.1", "SERVER_PORT": str(self.server.server_address[1]),
            "REQUEST_METHOD": self.command, "PATH_INFO": urllib.parse.unquote(parts.path),
            "QUERY_STRING": parts.query, "REMOTE_ADDR": self.client_address[0], "REMOTE_USER": user,
            "AUTH_TYPE": info["scheme"].capitalize(), "CONTENT_LENGTH": str(len(body)),
        }
        for header, var in (("Content-Type", "CONTENT_TYPE"), ("Git-Protocol", "GIT_PROTOCOL"),
                            ("Content-Encoding", "HTTP_CONTENT_ENCODING"), ("Accept", "HTTP_ACCEPT")):
            if self.headers.get(header):
                env[var] = self.headers[header]
        proc = subprocess.run([self.app.backend], input=body, capture_output=True, env=env)
        head, sep, payload = proc.stdout.partition(b"\r\n\r\n")
        if not sep:
            head, sep, payload = proc.stdout.partition(b"\n\n")
        status, headers, content_type = 200, [], "application/octet-stream"
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            name, value = name.strip(), value.strip()
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name.lower() == "content-type":
                content_type = value
            elif name and name.lower() not in ("content-length", "cache-control"):
                headers.append((name, value))
        if not sep:
            status, payload, content_type = 500, proc.stderr or b"git http-backend failed\n", "text/plain"
        with self.app.log_lock:
            self.app.git_requests.append({"method": self.command, "path": self.path, "status": status,
                                          "git_protocol": self.headers.get("Git-Protocol"),
                                          "remote_user": user, "user_agent": self.headers.get("User-Agent")})
        self.send(status, payload, content_type=content_type, headers=headers)


def main():
    p = mr.parser(__doc__.splitlines()[0])
    p.add_argument("--root", help="directory of bare repositories (default: a temporary one)")
    return mr.run(GitApp, GitHandler, p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
