#if MooseMCP
// A child process for MooseMCP's two-process test (not shipped as a product).
//
//   moose-mcp-worker echo STORE KEYFILE SERVER_URL COUNT
//       connects an MCP SDK Client through a MooseMCPTransport with a MooseMCPAuthorizer on the
//       encrypted store (never logging in: a session must be there), calls the echo tool COUNT
//       times, prints "ok TEXT" per call and "token FINGERPRINT" of the token it ended with.
import Foundation
import MCP
import MooseMCP
import MooseOAuth
import MooseOAuthSystem
import MooseSQLiteStorage
import MooseSecretStore

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

struct WorkerError: Error, CustomStringConvertible {
    let description: String
}

let arguments = CommandLine.arguments
guard arguments.count == 6, arguments[1] == "echo", let url = URL(string: arguments[4]), let count = Int(arguments[5]),
    (1...100).contains(count)
else {
    say("usage: moose-mcp-worker echo STORE KEYFILE SERVER_URL COUNT")
    exit(2)
}
do {
    let store = try SecretStore(path: arguments[2], masterKey: .keyFile(arguments[3]))
    let authorizer = try MooseMCPAuthorizer(
        serverURL: url, storage: EncryptedSessionStorage(store: store),
        login: .loopback { _ in
            throw WorkerError(description: "the worker must not log in: the session is in the store")
        })
    let transport = MooseMCPTransport(endpoint: url, authorizer: authorizer)
    let client = Client(name: "moose-mcp-worker", version: "1.0")
    _ = try await client.connect(transport: transport)
    for index in 0..<count {
        let (content, _) = try await client.callTool(
            name: "echo", arguments: ["text": .string("worker \(getpid()) \(index)")])
        guard case .text(let text, _, _)? = content.first else {
            throw WorkerError(description: "echo answered no text")
        }
        say("ok \(text)")
    }
    say(
        "token \(authorizer.manager.cachedAccessToken(minimumValidity: 0).map { TokenSet.fingerprint($0.value) } ?? "none")"
    )
    await client.disconnect()
} catch {
    say("error \(error)")
    exit(1)
}
#endif
