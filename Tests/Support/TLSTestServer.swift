public import Foundation

/// A private CA made by openssl in a temporary folder, the keys and certificates (for 127.0.0.1) it
/// issues, and HTTPS servers (Python's ssl module, `tools/testserver/tls_static_server.py`) that serve
/// `root` with one of them: a real TLS server whose key the test makes, for the pinning and CA tests.
public final class TLSTestCA: Sendable {
    /// One issued key and certificate, with its public-key pin (`sha256//` + base64 of the SHA-256 of
    /// its DER SubjectPublicKeyInfo, computed by openssl).
    public struct Leaf: Sendable {
        public let certificate: String
        public let key: String
        public let pin: String
        /// The DER SubjectPublicKeyInfo, as `openssl pkey -pubout -outform DER` writes it.
        public let subjectPublicKeyInfo: [UInt8]
        /// The certificate in DER.
        public let certificateDER: [UInt8]
    }

    public let folder: URL
    /// Files served, under `root` (`/hello.json` holds `{"hello": "pinned"}`).
    public var root: URL { folder.appendingPathComponent("root") }
    public var caFile: String { folder.appendingPathComponent("ca.pem").path }

    private init(folder: URL) { self.folder = folder }

    /// A new CA in a new temporary folder.
    public static func make() async throws -> TLSTestCA {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-pin-\(UUID().uuidString)")
        let ca = TLSTestCA(folder: folder)
        try FileManager.default.createDirectory(
            at: ca.root.appendingPathComponent(".well-known"), withIntermediateDirectories: true)
        try Data(#"{"hello": "pinned"}"#.utf8).write(to: ca.root.appendingPathComponent("hello.json"))
        try Data("subjectAltName=IP:127.0.0.1\n".utf8).write(to: folder.appendingPathComponent("san.ext"))
        try await ca.openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            ca.path("ca.key"),
            "-out", ca.path("ca.pem"), "-days", "2", "-subj", "/CN=Moose Pinning Test CA"
        ])
        return ca
    }

    func path(_ name: String) -> String { folder.appendingPathComponent(name).path }

    func openssl(_ arguments: [String]) async throws {
        // Its standard error into the output too: OpenSSL 3 draws RSA key generation as dots on it, which
        // landed in the middle of the test run's own lines ("..+..✘ Test …"), where tools/test's tally missed them.
        let result = await runProcessOffThePool(
            ["/bin/sh", "-c", "exec /usr/bin/openssl \"$@\" 2>&1", "openssl"] + arguments)
        guard result.status == 0 else {
            throw SpawnError("openssl \(arguments.joined(separator: " ")): \(result.output)")
        }
    }

    /// A new key (`rsa` or P-256 `ec`) and a certificate for 127.0.0.1 this CA signed.
    public func issue(_ name: String, rsa: Bool = false) async throws -> Leaf {
        let key = path("\(name).key"), certificate = path("\(name).pem")
        let algorithm = rsa ? ["-newkey", "rsa:2048"] : ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
        try await openssl(
            ["req"] + algorithm + ["-nodes", "-keyout", key, "-out", path("\(name).csr"), "-subj", "/CN=127.0.0.1"])
        try await openssl([
            "x509", "-req", "-in", path("\(name).csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
            "-CAcreateserial",
            "-out", certificate, "-days", "2", "-extfile", path("san.ext")
        ])
        try await openssl(["pkey", "-in", key, "-pubout", "-outform", "DER", "-out", path("\(name).spki")])
        try await openssl(["dgst", "-sha256", "-binary", "-out", path("\(name).spki.sha256"), path("\(name).spki")])
        try await openssl(["x509", "-in", certificate, "-outform", "DER", "-out", path("\(name).der")])
        let digest = try Data(contentsOf: URL(fileURLWithPath: path("\(name).spki.sha256")))
        return Leaf(
            certificate: certificate, key: key, pin: "sha256//" + digest.base64EncodedString(),
            subjectPublicKeyInfo: Array(try Data(contentsOf: URL(fileURLWithPath: path("\(name).spki")))),
            certificateDER: Array(try Data(contentsOf: URL(fileURLWithPath: path("\(name).der")))))
    }

    /// An HTTPS server on 127.0.0.1 presenting `leaf`, counting connections and requests.
    public func serve(_ leaf: Leaf) async throws -> TLSTestServer {
        let counts = path("counts-\(UUID().uuidString).json")
        let server = try await SpawnedServer.launch([
            "/usr/bin/python3", "-u", LocalServer.repositoryRoot + "/tools/testserver/tls_static_server.py",
            leaf.certificate, leaf.key, root.path, counts
        ])
        return TLSTestServer(server: server, countsFile: counts)
    }

    /// Removes the folder.
    public func remove() { try? FileManager.default.removeItem(at: folder) }
}

/// A running HTTPS server of a `TLSTestCA`.
public struct TLSTestServer: Sendable {
    public let server: SpawnedServer
    let countsFile: String

    /// `https://127.0.0.1:PORT`.
    public var url: URL { server.url }

    /// TCP connections accepted (a handshake refused by the client counts) and HTTP requests answered.
    public func counts() throws -> (connections: Int, requests: Int) {
        let object =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: countsFile))) as? [String: Int]
        return (object?["connections"] ?? -1, object?["requests"] ?? -1)
    }

    public func stop() async { await server.stop() }
}
