import Foundation
public import MooseJWT

/// A Glewlwyd instance of one test's own: `tools/glewlwyd/start` on its own port with a fresh state folder,
/// whose signing keys the test changes with `tools/glewlwyd/setup.py rotate` — never the shared instance on
/// 4594, which other tests use. `stop()` stops it (by its PID file) and removes its state folder.
public final class OwnGlewlwyd: Sendable {
    /// The keys the instance publishes after a rotation: the kid it signs with, and every public key.
    public struct PublishedKeys: Sendable {
        /// The kid of the key that signs tokens for clients without a `sign_kid` (`moose-service` among them).
        public let signing: String
        /// The public keys of its JWKS, in the order it publishes them.
        public let keys: [JWK]
    }

    /// `http://127.0.0.1:PORT/api/oidc`.
    public let issuer: String
    /// The port it listens on (127.0.0.1).
    public let port: Int
    /// Its state folder (keys, database, logs), removed by `stop()`.
    public let state: String
    /// The `MOOSE_GLEWLWYD_*` settings every `start`, `stop` and `rotate` of this instance gets.
    let environment: [String: String]

    private init(issuer: String, port: Int, state: String, environment: [String: String]) {
        self.issuer = issuer
        self.port = port
        self.state = state
        self.environment = environment
    }

    /// `tools/glewlwyd/<name>`.
    static func tool(_ name: String) -> String {
        Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/glewlwyd/" + name)
    }

    /// Starts an instance on `port` with a new state folder (`moose-glewlwyd-PORT` in the temporary folder: an
    /// instance a killed run left there is stopped first) and access tokens valid for `accessTokenSeconds`; the
    /// failure says why it cannot run here (the package cannot be installed, the port is taken…), and leaves
    /// nothing running.
    public static func start(port: Int, accessTokenSeconds: Int = 600) async -> Result<OwnGlewlwyd, SpawnError> {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("moose-glewlwyd-\(port)").path
        let environment = [
            "MOOSE_GLEWLWYD_PORT": String(port), "MOOSE_GLEWLWYD_STATE": state,
            "MOOSE_GLEWLWYD_ACCESS_TOKEN_SECONDS": String(accessTokenSeconds)
        ]
        let instance = OwnGlewlwyd(issuer: "", port: port, state: state, environment: environment)
        await instance.stop()
        let (status, output) = await runProcessOffThePool([tool("start")], environment: environment)
        guard status == 0, let issuer = output.split(separator: "\n").last.map(String.init), issuer.hasPrefix("http")
        else {
            await instance.stop()
            return .failure(SpawnError("tools/glewlwyd/start on port \(port) exited \(status) (its stderr above)"))
        }
        return .success(OwnGlewlwyd(issuer: issuer, port: port, state: state, environment: environment))
    }

    /// Runs `setup.py rotate STATE PORT arguments…` (`--renew KID`, `--add KID:ALG`, `--withdraw KID`,
    /// `--sign KID`, `--restart`) and returns what the instance publishes afterwards.
    public func rotate(_ arguments: [String]) async throws -> PublishedKeys {
        let (status, output) = await runProcessOffThePool(
            ["python3", Self.tool("setup.py"), "rotate", state, String(port)] + arguments, environment: environment)
        guard status == 0, let line = output.split(separator: "\n").last else {
            throw SpawnError("setup.py rotate \(arguments.joined(separator: " ")) exited \(status)")
        }
        let document = try JSONValue(parsing: Array(line.utf8))
        guard let signing = document["signing"]?.stringValue else {
            throw SpawnError("setup.py rotate printed no signing kid: \(line)")
        }
        return PublishedKeys(signing: signing, keys: try JWKS(json: Array(line.utf8)).keys)
    }

    /// Stops the instance (`tools/glewlwyd/stop`: by its PID file) and removes its state folder.
    public func stop() async {
        _ = await runProcessOffThePool([Self.tool("stop")], environment: environment)
    }
}
