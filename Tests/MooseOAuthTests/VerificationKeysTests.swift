import Foundation
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseOAuthSystem
import MooseResourceServer
import MooseTestSupport
import MooseTesting
import Testing

/// `VerificationKeys` and `PresentedToken`: keys from real PEM, JWK and JWKS files (Fixtures/joserfc),
/// from JWKS served on a loopback port and fetched with libcurl, and from a provider's discovery; tokens
/// as people hand them over. Each key set verifies joserfc's tokens with real signatures.
struct VerificationKeysTests {
    let tokens: [String: String]
    let validation = ClaimValidation(
        issuer: "https://id.example.com", audiences: ["moose-cli"],
        clock: { Date(timeIntervalSince1970: 1_800_000_000) })

    init() throws {
        let root = try #require(
            JSONSerialization.jsonObject(with: Fixtures.data("joserfc/tokens.json")) as? [String: Any])
        tokens = try #require(root["tokens"] as? [String: String])
    }

    func verify(_ name: String, with keys: VerificationKeys) throws {
        let verifier = try #require(keys.verifier(validation: validation))
        let token = try #require(tokens[name])
        _ = try verifier.verify(token)
    }

    /// A scratch folder, removed by `body`'s end.
    func withFolder(_ body: (URL) throws -> Void) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moose-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try body(folder)
    }

    func expectError(
        _ code: VerificationInputError.Code, containing text: String, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () throws -> Void
    ) {
        do {
            try body()
            Issue.record("no error", sourceLocation: sourceLocation)
        } catch let error as VerificationInputError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains(text), "\(error)", sourceLocation: sourceLocation)
            #expect(!error.message.contains("--"), "a library error names no CLI flag", sourceLocation: sourceLocation)
        } catch {
            Issue.record("not a VerificationInputError: \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func keyFilesOfEveryKindVerify() throws {
        let ec = try VerificationKeys.read([.keyFile(Fixtures.path("joserfc/ec256-public.pem"))])
        #expect(ec.keys.count == 1 && ec.algorithms == [.es256])
        try verify("es256", with: ec)
        // A private key's PEM verifies with its public part; a certificate-free RSA public key too.
        try verify("es256", with: try VerificationKeys.read([.keyFile(Fixtures.path("joserfc/ec256-private.pem"))]))
        let rsa = try VerificationKeys.read([.keyFile(Fixtures.path("joserfc/rsa-public.pem"))])
        try verify("rs256", with: rsa)
        try verify("ps256", with: rsa)
        // A JWKS as a key file and as a JWKS file: every key of it, in order.
        let set = try VerificationKeys.read([.jwks(Fixtures.path("joserfc/jwks.json"))])
        #expect(set.keys.count == 6 && set.skipped.isEmpty)
        #expect(set.algorithms.isSuperset(of: [.rs256, .es256, .es384, .es512, .eddsa]))
        #expect(!set.algorithms.contains(.hs256), "no HMAC with public keys")
        for name in ["rs256", "ps256", "es256", "es384", "es512", "eddsa", "ed25519"] { try verify(name, with: set) }
        let asKeyFile = try VerificationKeys.read([.keyFile(Fixtures.path("joserfc/jwks.json"))])
        #expect(asKeyFile.keys.map(\.keyID) == set.keys.map(\.keyID))
        // An HMAC secret, as its file's bytes.
        let secret = try VerificationKeys.read([.secretFile(Fixtures.path("joserfc/hs256.secret"))])
        #expect(secret.algorithms == [.hs256, .hs384, .hs512])
        try verify("hs256", with: secret)
        // Several sources: their keys in order.
        let both = try VerificationKeys.read([
            .keyFile(Fixtures.path("joserfc/ec256-public.pem")), .keyFile(Fixtures.path("joserfc/rsa-public.pem"))
        ])
        #expect(both.keys.map(\.family) == [.ec, .rsa])
        #expect(VerificationKeys().verifier(validation: validation) == nil, "no keys: nothing verifies")
    }

    @Test func aSingleJWKFileVerifies() throws {
        try withFolder { folder in
            let set = try JWKS(json: Fixtures.string("joserfc/jwks.json"))
            let es256 = try #require(set.keys.first { $0.curve == "P-256" })
            let file = folder.appendingPathComponent("key.json")
            try Data(JSONValue.object(es256.fields).serialized().utf8).write(to: file)
            try verify("es256", with: try VerificationKeys.read([.keyFile(file.path)]))
        }
    }

    @Test func unusableFilesAreSaidForWhatTheyAre() throws {
        try withFolder { folder in
            func file(_ name: String, _ bytes: [UInt8]) throws -> String {
                let url = folder.appendingPathComponent(name)
                try Data(bytes).write(to: url)
                return url.path
            }
            expectError(VerificationInputError.unreadableFile, containing: "/nonexistent/key.pem: no such file") {
                _ = try VerificationKeys.read([.keyFile("/nonexistent/key.pem")])
            }
            let garbage = try file("garbage.bin", [0xFF, 0x00, 0x41])
            expectError(VerificationInputError.unusableKey, containing: "is neither PEM nor JSON") {
                _ = try VerificationKeys.read([.keyFile(garbage)])
            }
            let badPEM = try file("bad.pem", Array("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n".utf8))
            expectError(VerificationInputError.unusableKey, containing: "key file \(badPEM): ") {
                _ = try VerificationKeys.read([.keyFile(badPEM)])
            }
            let notJSON = try file("jwks.json", Array("{\"keys\": ".utf8))
            expectError(VerificationInputError.unusableKey, containing: "is not a usable JWKS") {
                _ = try VerificationKeys.read([.jwks(notJSON)])
            }
            let onlyUnknown = try file("unknown.json", Array(#"{"keys":[{"kty":"XYZ","kid":"k1"}]}"#.utf8))
            expectError(VerificationInputError.unusableKey, containing: "holds no usable key (skipped: keys[0]") {
                _ = try VerificationKeys.read([.jwks(onlyUnknown)])
            }
            let empty = try file("empty.secret", [])
            expectError(VerificationInputError.unusableKey, containing: "is empty") {
                _ = try VerificationKeys.read([.secretFile(empty)])
            }
            let big = try file("big.secret", Array(repeating: 0x61, count: VerificationKeys.maximumSecretSize + 1))
            expectError(VerificationInputError.unreadableFile, containing: "is larger than 65536 bytes") {
                _ = try VerificationKeys.read([.secretFile(big)])
            }
            let bigJWKS = try file("big.json", Array(repeating: 0x20, count: VerificationKeys.maximumFileSize + 1))
            expectError(VerificationInputError.unreadableFile, containing: "is larger than") {
                _ = try VerificationKeys.read([.jwks(bigJWKS)])
            }
        }
        // A remote source is not read without a transport.
        expectError(VerificationInputError.insecureLocation, containing: "network") {
            _ = try VerificationKeys.read([.issuer("https://id.example.com")])
        }
        #expect(VerificationKeys.Source.jwks("https://id.example.com/jwks").isRemote)
        #expect(!VerificationKeys.Source.jwks("jwks.json").isRemote)
    }

    /// A usable set with unusable members: the keys, and the members skipped with their source.
    @Test func skippedMembersAreNamed() throws {
        var document = try #require(
            JSONSerialization.jsonObject(with: Fixtures.data("joserfc/jwks.json")) as? [String: Any])
        var keys = try #require(document["keys"] as? [Any])
        keys.append(["kty": "EC", "crv": "P-192", "kid": "old", "x": "AA", "y": "AA"])
        document["keys"] = keys
        let loaded = try VerificationKeys.jwks(
            Array(try JSONSerialization.data(withJSONObject: document)), source: "jwks.json")
        #expect(loaded.keys.count == 6)
        #expect(
            loaded.skipped.count == 1 && loaded.skipped[0].hasPrefix("jwks.json: keys[6] (kid old)"),
            "\(loaded.skipped)")
    }

    /// A JWKS served on a loopback port, fetched with libcurl.
    @Test func aJWKSURLIsFetchedAndRefusedWhenItIsNoJWKS() async throws {
        let jwks = try Fixtures.string("joserfc/jwks.json")
        let server = try LoopbackHTTPServer(connectionDeadline: 30)
        defer { server.stop() }
        server.serve(
            ScriptedTransport { request in
                switch request.url?.path {
                case "/jwks.json": return .json(jwks)
                case "/pem": return .json("-----BEGIN PUBLIC KEY-----")
                default: return APIResponse(status: .notFound, headerFields: [:], body: Data())
                }
            })
        let base = server.baseURL.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        let transport = CurlTransport()
        let keys = try await VerificationKeys.load([.jwks(base + "/jwks.json")], transport: transport)
        #expect(keys.keys.count == 6)
        try verify("es256", with: keys)
        do throws(VerificationInputError) {
            _ = try await VerificationKeys.load([.jwks(base + "/missing.json")], transport: transport)
            Issue.record("a 404 gave keys")
        } catch {
            #expect(error.code == VerificationInputError.fetchFailed && error.message.contains("HTTP 404"), "\(error)")
            #expect(!error.isInputError)
        }
        do throws(VerificationInputError) {
            _ = try await VerificationKeys.load([.jwks(base + "/pem")], transport: transport)
            Issue.record("a PEM was read as a JWKS")
        } catch {
            #expect(error.code == VerificationInputError.unusableKey && error.message.contains("not a usable JWKS"))
            #expect(error.source == .jwks(base + "/pem"))
        }
    }

    @Test func keysAreNeverFetchedInClearTextFromAnotherMachine() async throws {
        let transport = ScriptedTransport { _ in
            Issue.record("a request was sent"); return .json("{}")
        }
        for location in ["http://keys.example.test/jwks.json", "https://"] {
            do throws(VerificationInputError) {
                _ = try await VerificationKeys.load([.jwks(location)], transport: transport)
                Issue.record("\(location) was fetched")
            } catch {
                #expect(error.code == VerificationInputError.insecureLocation && error.isInputError, "\(error)")
            }
        }
        do throws(VerificationInputError) {
            _ = try await VerificationKeys.load([.issuer("http://id.example.com")], transport: transport)
            Issue.record("a plain http issuer was used")
        } catch {
            #expect(
                error.code == VerificationInputError.invalidIssuer && error.message.contains("plain http"), "\(error)")
        }
        #expect(transport.requests.isEmpty)
    }

    @Test func anIssuersKeysComeThroughItsDiscovery() async throws {
        let provider = TestProvider()
        let keys = try await VerificationKeys.load([.issuer(provider.issuer)], transport: provider)
        #expect(Set(keys.keys.compactMap(\.keyID)) == Set(provider.publishedKeyIDs))
        #expect(!keys.algorithms.isEmpty)
        // A failing discovery keeps its OAuthError; a transport failure its HTTPRequestError.
        let wrong = "https://other.test"
        do throws(VerificationInputError) {
            _ = try await VerificationKeys.load([.issuer(wrong)], transport: provider)
            Issue.record("another issuer's document was accepted")
        } catch {
            #expect(error.code == VerificationInputError.discoveryFailed, "\(error)")
            #expect(error.underlying is OAuthError && error.source == .issuer(wrong))
            #expect(error.message.hasPrefix("cannot use issuer \(wrong): "))
        }
        let unreachable = ScriptedTransport { _ in
            throw HTTPRequestError(HTTPRequestError.nameNotResolved, "the name keys.test did not resolve")
        }
        let url = try #require(URL(string: "https://keys.test/jwks"))
        do throws(VerificationInputError) {
            _ = try await VerificationKeys.fetchJWKS(url, transport: unreachable)
            Issue.record("no error")
        } catch {
            #expect(error.code == VerificationInputError.fetchFailed)
            #expect((error.underlying as? HTTPRequestError)?.code == HTTPRequestError.nameNotResolved)
        }
        let untrusted = ScriptedTransport { _ in
            throw HTTPRequestError(HTTPRequestError.tls, "unable to get local issuer certificate")
        }
        do throws(VerificationInputError) {
            _ = try await VerificationKeys.fetchJWKS(url, transport: untrusted)
            Issue.record("no error")
        } catch {
            #expect(error.code == VerificationInputError.fetchFailed && !error.isInputError)
            #expect(
                error.message.hasPrefix("cannot fetch the JWKS: the TLS connection to https://keys.test/jwks failed"),
                "\(error)")
        }
    }

    @Test func presentedTokensAreTrimmedOfBearerAndWhitespace() throws {
        #expect(try PresentedToken.text(from: Array("  abc.def.ghi \n".utf8)) == "abc.def.ghi")
        #expect(try PresentedToken.text(from: Array("Bearer abc.def.ghi\r\n".utf8)) == "abc.def.ghi")
        #expect(try PresentedToken.text(from: Array("bEaReR    abc".utf8)) == "abc")
        #expect(try PresentedToken.text(from: Array("Bearer \tabc".utf8)) == "abc")
        #expect(try PresentedToken.text(from: Array("Bearer\tabc".utf8)) == "abc")
        // The same rule as a resource server's (`moose inspect` and `moose verify` agree).
        for text in ["Bearer\tabc", "bearer \t abc", " BEARER abc\n"] {
            #expect(try PresentedToken.text(from: Array(text.utf8)) == ResourceServer.accessToken(in: Array(text.utf8)))
        }
        #expect(try PresentedToken.text(from: Array("Bearerabc".utf8)) == "Bearerabc")
        expectError(VerificationInputError.unusableToken, containing: "empty") {
            _ = try PresentedToken.text(from: Array(" \n\t".utf8))
        }
        // The scheme alone is no prefix of anything (trimmed first): it is what was handed over.
        #expect(try PresentedToken.text(from: Array("Bearer   ".utf8)) == "Bearer")
        expectError(VerificationInputError.unusableToken, containing: "not UTF-8") {
            _ = try PresentedToken.text(from: [0xFF, 0xFE, 0x00, 0x80])
        }
        try withFolder { folder in
            let file = folder.appendingPathComponent("token.jwt")
            let token = try #require(tokens["es256"])
            try Data("\n  Bearer \(token)\n".utf8).write(to: file)
            #expect(try PresentedToken.read(file: file.path) == token)
            expectError(VerificationInputError.unreadableFile, containing: "is larger than 10 bytes") {
                _ = try PresentedToken.read(file: file.path, limit: 10)
            }
            expectError(VerificationInputError.unreadableFile, containing: "no such file") {
                _ = try PresentedToken.read(file: folder.appendingPathComponent("none").path)
            }
        }
    }
}
