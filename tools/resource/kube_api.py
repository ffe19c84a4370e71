#!/usr/bin/env python3
"""A tiny fake Kubernetes API server, just enough for the real kubectl, over HTTPS on loopback.
Every request, discovery included, needs a bearer token that the real test IdP accepts (RFC 7662
introspection, see moose_resource.py); a kubeconfig whose user is an exec credential plugin
(client.authentication.k8s.io/v1, e.g. `moose token --format exec-credential`) supplies it.

    python3 tools/resource/kube_api.py --port 0 --issuer http://127.0.0.1:8765 [--cert-dir DIR]
    -> READY https://127.0.0.1:PORT       (exits when stdin closes, or on SIGTERM)

HTTPS because kubectl (client-go) reads no user credentials at all, exec plugin included, for an
http:// server. The certificates come from openssl: DIR/ca.crt (the kubeconfig's certificate-authority)
signs DIR/server.crt (SAN IP:127.0.0.1, DNS:localhost); DIR defaults to a temporary directory removed
on exit, and existing files in DIR are reused. --plain-http serves HTTP instead (kubectl then sends no
token: every request is 401).

Works with: kubectl version, kubectl get namespaces [-o json|yaml|name], kubectl get ns NAME,
kubectl get --raw /api, kubectl auth whoami (SelfSubjectReview: username is the token's user, or
client:<client_id> for client-credentials tokens; extra has the token's fingerprint, client_id, scope).
Only legacy discovery is served (no aggregated discovery, no OpenAPI documents: kubectl falls back).
GET /_test/stats (adds "kube_requests": the last requests' method, path, Accept and User-Agent),
POST /_test/reset.
"""
import collections
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moose_resource as mr  # noqa: E402

CREATED = "2026-01-01T00:00:00Z"
NAMESPACES = ["default", "kube-node-lease", "kube-public", "kube-system", "moose"]
VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0", "gitCommit": "0000000000000000000000000000000000000000",
           "gitTreeState": "clean", "buildDate": CREATED, "goVersion": "go1.23.0", "compiler": "gc",
           "platform": "linux/amd64"}


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def namespace(name):
    return {"kind": "Namespace", "apiVersion": "v1",
            "metadata": {"name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, "moose-kube:" + name)),
                         "resourceVersion": "1", "creationTimestamp": CREATED,
                         "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def namespace_table(names):
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": "1"},
            "columnDefinitions": [
                {"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0},
                {"name": "Status", "type": "string", "format": "", "description": "Phase", "priority": 0},
                {"name": "Age", "type": "string", "format": "", "description": "Age", "priority": 0}],
            "rows": [{"cells": [n, "Active", "300d"],
                      "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                 "metadata": namespace(n)["metadata"]}} for n in names]}


class KubeApp(mr.App):
    name = "kube"

    def __init__(self, args):
        super().__init__(args)
        self.log_lock = threading.Lock()
        self.kube_requests = collections.deque(maxlen=200)
        self.cert_dir = None
        self.temp_dir = None

    def start(self):
        if self.args.plain_http:
            return
        if self.args.cert_dir:
            self.cert_dir = os.path.abspath(self.args.cert_dir)
            os.makedirs(self.cert_dir, exist_ok=True)
        else:
            self.cert_dir = self.temp_dir = tempfile.mkdtemp(prefix="moose-kube-")
        make_certificates(self.cert_dir)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(self.cert_dir, "server.crt"), os.path.join(self.cert_dir, "server.key"))
        ctx.set_alpn_protocols(["http/1.1"])   # no h2: http.server speaks HTTP/1.1 only
        self.ssl_context = ctx

    def stop(self):
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def reset(self):
        with self.log_lock:
            self.kube_requests.clear()

    def stats_extra(self):
        with self.log_lock:
            extra = {"kube_requests": list(self.kube_requests)}
        if self.cert_dir:
            extra["ca_file"] = os.path.join(self.cert_dir, "ca.crt")
        return extra


def make_certificates(directory):
    """A CA and a server certificate for 127.0.0.1/localhost, made by openssl unless already there."""
    path = lambda name: os.path.join(directory, name)
    if all(os.path.exists(path(n)) for n in ("ca.crt", "server.crt", "server.key")):
        return
    run = lambda *cmd: subprocess.run(cmd, check=True, capture_output=True, cwd=directory)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    run("openssl", "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "30",
        "-subj", "/CN=moose test kube CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("openssl", "req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    with open(path("server.ext"), "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.crt", "-days", "30", "-extfile", "server.ext")
    for n in ("server.csr", "server.ext", "ca.srl"):
        if os.path.exists(path(n)):
            os.remove(path(n))


class KubeHandler(mr.Handler):
    def challenges(self, error, **_):
        return [("WWW-Authenticate", 'Bearer realm="kubernetes"' if error is None else f'Bearer error="{error}"')]

    def send(self, status_code, body=b"", content_type="application/json", headers=()):
        if status_code == 401 and isinstance(body, dict) and body.get("kind") != "Status":
            body = status(401, "Unauthorized", "Unauthorized")
        elif status_code == 503 and isinstance(body, dict) and body.get("kind") != "Status":
            body = status(503, "ServiceUnavailable", body.get("error_description", "introspection failed"))
        super().send(status_code, body, content_type, headers)

    def route(self):
        parts = urllib.parse.urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        with self.app.log_lock:
            self.app.kube_requests.append({"method": self.command, "path": self.path,
                                           "accept": self.headers.get("Accept"),
                                           "user_agent": self.headers.get("User-Agent")})
        body = self.read_body()
        info = self.authenticate(challenges=self.challenges, body_bytes=len(body) if body else None)
        if info is None:
            return
        accept = self.headers.get("Accept", "")
        base = self.app.base_url.split("//", 1)[1]

        if self.command == "POST" and path == "/apis/authentication.k8s.io/v1/selfsubjectreviews":
            user = info.get("username") or f"client:{info.get('client_id')}"
            return self.send(201, {
                "kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": None},
                "status": {"userInfo": {"username": user, "groups": ["system:authenticated"], "extra": {
                    "moose.dev/token-fingerprint": [info["fingerprint"]],
                    "moose.dev/client-id": [info.get("client_id") or ""],
                    "moose.dev/scope": (info.get("scope") or "").split()}}}})
        if self.command not in ("GET", "HEAD"):
            return self.send(405, status(405, "MethodNotAllowed", f"{self.command} is not supported"))
        if path == "/version":
            major, minor = self.app.args.server_version.lstrip("v").split(".")[:2]
            return self.send(200, dict(VERSION, major=major, minor=minor, gitVersion=self.app.args.server_version))
        if path == "/api":
            return self.send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": base}]})
        if path == "/apis":
            return self.send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
                "name": "authentication.k8s.io",
                "versions": [{"groupVersion": "authentication.k8s.io/v1", "version": "v1"}],
                "preferredVersion": {"groupVersion": "authentication.k8s.io/v1", "version": "v1"}}]})
        if path == "/api/v1":
            return self.send(200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [{
                "name": "namespaces", "singularName": "namespace", "namespaced": False, "kind": "Namespace",
                "verbs": ["get", "list"], "shortNames": ["ns"]}]})
        if path == "/apis/authentication.k8s.io/v1":
            return self.send(200, {"kind": "APIResourceList", "apiVersion": "v1",
                                   "groupVersion": "authentication.k8s.io/v1", "resources": [{
                                       "name": "selfsubjectreviews", "singularName": "selfsubjectreview",
                                       "namespaced": False, "kind": "SelfSubjectReview", "verbs": ["create"]}]})
        if path == "/api/v1/namespaces":
            if "as=Table" in accept:
                return self.send(200, namespace_table(NAMESPACES),
                                 content_type="application/json;as=Table;v=v1;g=meta.k8s.io")
            return self.send(200, {"kind": "NamespaceList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                                   "items": [namespace(n) for n in NAMESPACES]})
        if path.startswith("/api/v1/namespaces/") and path.count("/") == 4:
            name = path.rsplit("/", 1)[1]
            if name not in NAMESPACES:
                return self.send(404, status(404, "NotFound", f'namespaces "{name}" not found'))
            if "as=Table" in accept:
                return self.send(200, namespace_table([name]),
                                 content_type="application/json;as=Table;v=v1;g=meta.k8s.io")
            return self.send(200, namespace(name))
        return self.send(404, status(404, "NotFound", "the server could not find the requested resource"))


def main():
    p = mr.parser(__doc__.splitlines()[0])
    p.add_argument("--cert-dir", help="where ca.crt, server.crt and server.key are (made if missing)")
    p.add_argument("--server-version", default="v1.32.0",
                   help="what /version reports (gcloud's kubectl dispatcher runs the matching kubectl.1.NN)")
    p.add_argument("--plain-http", action="store_true", help="serve HTTP (kubectl then sends no credentials)")
    return mr.run(KubeApp, KubeHandler, p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
