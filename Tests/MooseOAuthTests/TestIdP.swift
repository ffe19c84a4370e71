import Foundation
import MooseHTTP
import MooseOAuth
import MooseTesting
import MooseURLSession
import Testing

/// The real test identity provider (tools/idp/start: django-oauth-toolkit on 127.0.0.1). Started
/// once per test process if `MOOSE_IDP_ISSUER` is not already set by tools/test.
enum TestIdP {
    static let issuer: String = {
        if let issuer = ProcessInfo.processInfo.environment["MOOSE_IDP_ISSUER"], !issuer.isEmpty { return issuer }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/idp/start"))
        let pipe = Pipe()
        process.standardOutput = pipe
        do { try process.run() } catch { fatalError("cannot run tools/idp/start: \(error)") }
        process.waitUntilExit()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        guard process.terminationStatus == 0, let issuer = output.split(separator: "\n").last.map(String.init) else {
            fatalError("tools/idp/start failed: \(output)")
        }
        return issuer
    }()

    static let transport = URLSessionTransport()
    static let discovery = Discovery(transport: transport)

    static func metadata() async throws -> ProviderMetadata { try await discovery.metadata(for: issuer) }

    static func client(_ id: String, _ authentication: ClientAuthentication = .none) async throws -> OAuthClient {
        OAuthClient(metadata: try await metadata(), clientID: id, authentication: authentication, transport: transport)
    }
}
