// moose-test-provider: MooseTesting's TestProvider on a loopback port, for shell scripts and other
// languages' tests. Prints the issuer on the first line of stdout, then serves until it is killed.
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import MooseCrypto
import MooseJWT
import MooseTesting

// A parent may have started this process with signals blocked (a thread of a test runner, whose mask a
// child inherits): SIGTERM and SIGINT must end it, whatever it inherited.
var unblocked = sigset_t()
sigemptyset(&unblocked)
sigprocmask(SIG_SETMASK, &unblocked, nil)
signal(SIGTERM, SIG_DFL)
signal(SIGINT, SIG_DFL)

let usage = """
    usage: moose-test-provider [--port N]
                               [--client ID [--secret S | --public-key-file PATH] [--redirect-uri URI]…]…
                               [--access-token-lifetime SECONDS] [--opaque-tokens] [--require-par]
                               [--dpop-nonce] [--no-rotation] [--user SUBJECT]

    Runs an OAuth 2.0 / OpenID Connect provider for tests on 127.0.0.1 (MooseTesting's TestProvider)
    and prints its issuer (http://127.0.0.1:PORT) on the first line. Without --client it knows
    test-app (public; com.example.app:/oauth/callback and http://127.0.0.1/callback on any port),
    test-confidential (secret test-secret) and test-service (secret service-secret).
    --public-key-file makes the client before it authenticate with private_key_jwt (RFC 7523): PATH
    holds its public key, PEM (SubjectPublicKeyInfo, PKCS#1 or a certificate) or one JWK as JSON
    (public members only; an "alg" in it pins the algorithm).
    The user (default alice) approves every authorization request at once; a device login is approved
    by GET /device/verify?user_code=CODE. Stop it with SIGTERM or Ctrl-C.

    example (bash):
      exec 3< <(moose-test-provider --client ci --secret s3cret); provider=$!; read -r issuer <&3
      moose login --issuer "$issuer" … ; kill "$provider"
    """

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("moose-test-provider: \(message)\n\(usage)\n".utf8))
    exit(2)
}

var port: UInt16 = 0
var clients: [TestProvider.Client] = []
var configuration = TestProvider.Configuration()
var subject = "alice"
var arguments = CommandLine.arguments.dropFirst()
@MainActor func value(_ option: String) -> String {
    guard let next = arguments.popFirst() else { fail("\(option) needs a value") }
    return next
}

/// The client's public key from `path`: a JWK when the file is a JSON object, else PEM.
func publicKey(fromFile path: String) -> JWK {
    guard let data = FileManager.default.contents(atPath: path) else { fail("--public-key-file: cannot read \(path)") }
    let text = String(decoding: data, as: UTF8.self)
    let jwk: JWK
    if text.trimmingCharacters(in: .whitespacesAndNewlines).hasPrefix("{") {
        do {
            jwk = try JWK(json: text)
        } catch {
            fail("--public-key-file: \(path) is not a JWK: \(error)")
        }
        guard !jwk.hasPrivateMaterial else {
            fail("--public-key-file: \(path) holds a private key; give the public JWK")
        }
    } else {
        do {
            jwk = try JWK(publicKey: try PublicKey(pem: text))
        } catch {
            fail("--public-key-file: \(path) is neither a PEM public key nor a JWK: \(error)")
        }
    }
    do {
        _ = try jwk.verificationKey()
    } catch {
        fail("--public-key-file: the key in \(path) cannot verify signatures: \(error)")
    }
    return jwk
}

while let argument = arguments.popFirst() {
    switch argument {
    case "-h", "--help":
        FileHandle.standardOutput.write(Data((usage + "\n").utf8))
        exit(0)
    case "--port":
        guard let number = UInt16(value(argument)) else { fail("--port takes 0…65535") }
        port = number
    case "--client": clients.append(TestProvider.Client(id: value(argument)))
    case "--secret":
        guard !clients.isEmpty else { fail("--secret follows the --client it belongs to") }
        clients[clients.count - 1].authentication = .secret(value(argument))
    case "--public-key-file":
        guard !clients.isEmpty else { fail("--public-key-file follows the --client it belongs to") }
        clients[clients.count - 1].authentication = .privateKeyJWT(publicKey(fromFile: value(argument)))
    case "--redirect-uri":
        guard !clients.isEmpty else { fail("--redirect-uri follows the --client it belongs to") }
        clients[clients.count - 1].redirectURIs.append(value(argument))
    case "--access-token-lifetime":
        guard let seconds = Int(value(argument)), (1...86_400).contains(seconds) else {
            fail("--access-token-lifetime takes 1…86400 seconds")
        }
        configuration.accessTokenLifetime = seconds
    case "--opaque-tokens": configuration.accessTokenFormat = .opaque
    case "--require-par": configuration.requiresPushedAuthorization = true
    case "--dpop-nonce": configuration.requiresDPoPNonce = true
    case "--no-rotation": configuration.rotatesRefreshTokens = false
    case "--user": subject = value(argument)
    default: fail("unknown argument \(argument)")
    }
}
for index in clients.indices where clients[index].redirectURIs.isEmpty {
    clients[index].redirectURIs = TestProvider.Client.defaultPublic.redirectURIs
}

let server: LoopbackHTTPServer
do {
    server = try LoopbackHTTPServer(port: port)
} catch {
    FileHandle.standardError.write(Data("moose-test-provider: cannot listen on 127.0.0.1:\(port): \(error)\n".utf8))
    exit(1)
}
var issuer = server.baseURL.absoluteString
while issuer.hasSuffix("/") { issuer.removeLast() }
let provider = TestProvider(
    issuer: issuer,
    clients: clients.isEmpty ? [.defaultPublic, .defaultConfidential, .defaultService] : clients,
    user: subject == "alice" ? .alice : TestProvider.User(subject: subject), configuration: configuration)
server.serve(provider)
FileHandle.standardOutput.write(Data((issuer + "\n").utf8))
signal(SIGPIPE, SIG_IGN)
while true { sleep(3600) }
