import Foundation
import MooseHTTP
import MooseTestSupport
import MooseURLSession
import Testing

/// Issue 34 §5: public-key (SPKI SHA-256) pins per host, validated when made.
struct PublicKeyPinsParsingTests {
    static let a = "sha256//" + Data(repeating: 0xA1, count: 32).base64EncodedString()
    static let b = "sha256//" + Data(repeating: 0xB2, count: 32).base64EncodedString()

    func refusal(_ pins: [String: [String]]) -> HTTPRequestError? {
        do {
            _ = try PublicKeyPins(pins)
            return nil
        } catch {
            return error
        }
    }

    @Test func pinsAreKeptPerHostLowerCasedWithoutTrailingDotOrBrackets() throws {
        let bare = String(Self.b.dropFirst(8))
        let pins = try PublicKeyPins(["ID.Example.COM.": [Self.a, bare, Self.a], "[::1]": [Self.b]])
        #expect(pins.hosts == ["::1", "id.example.com"])
        #expect(
            pins.pins(for: "id.example.com") == [Self.a, Self.b],
            "bare base64 is read as sha256//, repeats dropped, order kept")
        #expect(pins.pins(for: "ID.EXAMPLE.com.") == [Self.a, Self.b])
        #expect(pins.pins(for: "::1") == [Self.b] && pins.pins(for: "[::1]") == [Self.b])
        #expect(
            pins.pins(for: "other.example.com").isEmpty && pins.pins(for: "example.com").isEmpty,
            "hosts are compared exactly")
        #expect(pins.description == "::1: \(Self.b); id.example.com: \(Self.a), \(Self.b)")
        #expect(PublicKeyPins().isEmpty && !pins.isEmpty)
        #expect(pins.permits(host: "id.example.com", subjectPublicKeyInfoSHA256: [UInt8](repeating: 0xB2, count: 32)))
        #expect(!pins.permits(host: "id.example.com", subjectPublicKeyInfoSHA256: [UInt8](repeating: 0xC3, count: 32)))
        #expect(
            pins.permits(host: "unpinned.example.com", subjectPublicKeyInfoSHA256: [UInt8](repeating: 0xC3, count: 32)))
    }

    @Test func badPinsAreRefusedWithAClearError() throws {
        let cases: [(String, String)] = [
            ("sha256//not base64!", "not standard base64"),
            ("sha256//" + Data(repeating: 1, count: 20).base64EncodedString(), "has 20 bytes; a SHA-256 pin has 32"),
            ("sha256//" + Data(repeating: 1, count: 48).base64EncodedString(), "has 48 bytes"),
            (
                "sha1//" + Data(repeating: 1, count: 20).base64EncodedString(),
                "uses sha1; only sha256// pins are supported"
            ),
            (
                "sha256//" + String(Data(repeating: 1, count: 32).base64EncodedString().dropLast()),
                "not standard base64"
            ),
            (
                "sha256//"
                    + Data(repeating: 0xFB, count: 32).base64EncodedString().replacingOccurrences(of: "+", with: "-"),
                "not standard base64"
            ),
            ("", "has 0 bytes"),
            ("sha256//" + String(repeating: "A", count: 400), "not standard base64"),
            ("sha256//\u{1B}[31m", "\\u{1b}[31m")
        ]
        for (pin, message) in cases {
            let error = try #require(refusal(["id.example.com": [pin]]), "\(pin) was accepted")
            #expect(error.code == HTTPRequestError.pinning, "\(error)")
            #expect(error.message.contains(message), "\(pin): \(error.message)")
            #expect(!error.message.contains("\u{1B}"), "no control character reaches a message: \(error.message)")
        }
        // Base64 whose last character has bits set beyond the 32 bytes is not canonical.
        let canonical = Data(repeating: 1, count: 32).base64EncodedString() // "AQEB…AQE="
        let offCanonical = String(canonical.dropLast(2)) + "F="
        let error = try #require(refusal(["h": ["sha256//" + offCanonical]]))
        #expect(
            error.message.contains("not canonical base64") || error.message.contains("not standard base64"),
            "\(error.message)")
    }

    @Test func badHostsAreRefused() throws {
        for (host, message) in [
            ("*.example.com", "wildcard"), ("", "host name or an IP address"), ("id example.com", "not a host name"),
            ("id.exämple.com", "not a host name"), (String(repeating: "a", count: 300), "300 bytes")
        ] {
            let error = try #require(refusal([host: [Self.a]]), "\(host) was accepted")
            #expect(
                error.code == HTTPRequestError.pinning && error.message.contains(message), "\(host): \(error.message)")
        }
        #expect(refusal(["id.example.com": []])?.message.contains("has no pins") == true)
        let many = (0..<17).map { "sha256//" + Data(repeating: UInt8($0), count: 32).base64EncodedString() }
        #expect(refusal(["id.example.com": many])?.message.contains("at most 16 pins") == true)
        let hosts = Dictionary(uniqueKeysWithValues: (0..<65).map { ("h\($0).example.com", [Self.a]) })
        #expect(refusal(hosts)?.message.contains("at most 64 hosts") == true)
    }

    /// The pins for a host not known yet (`moose login --pin-public-key` before discovery): checked as
    /// for a host, written canonically, a repeat once.
    @Test func pinsAreCheckedAndWrittenCanonicallyWithoutAHost() throws {
        let bare = String(Self.a.dropFirst("sha256//".count))
        #expect(try PublicKeyPins.canonical([bare, Self.a]) == [Self.a])
        #expect(try PublicKeyPins.canonical([Self.a]) == PublicKeyPins(["h": [Self.a]]).pins(for: "h"))
        for pins in [
            [], ["sha256//not-base64"],
            (0..<17).map { "sha256//" + Data(repeating: UInt8($0), count: 32).base64EncodedString() }
        ] {
            #expect(throws: HTTPRequestError.self, "\(pins.count) pins") { try PublicKeyPins.canonical(pins) }
        }
    }

    @Test func theSubjectPublicKeyInfoIsReadFromACertificateAsOpenSSLWritesIt() async throws {
        let ca = try await TLSTestCA.make()
        defer { ca.remove() }
        for rsa in [false, true] {
            let leaf = try await ca.issue(rsa ? "rsa" : "ec", rsa: rsa)
            #expect(
                PublicKeyPins.subjectPublicKeyInfo(certificateDER: leaf.certificateDER) == leaf.subjectPublicKeyInfo)
            // Truncated or damaged certificates never trap, and never yield a key.
            for length in stride(from: 0, to: leaf.certificateDER.count - 1, by: 7) {
                let prefix = Array(leaf.certificateDER.prefix(length))
                #expect(PublicKeyPins.subjectPublicKeyInfo(certificateDER: prefix) == nil, "\(length) bytes")
            }
            var damaged = leaf.certificateDER
            damaged[1] = 0x84 // a four-byte length: refused
            #expect(PublicKeyPins.subjectPublicKeyInfo(certificateDER: damaged) == nil)
        }
        #expect(PublicKeyPins.subjectPublicKeyInfo(certificateDER: [0x30, 0x83, 0xFF, 0xFF, 0xFF]) == nil)
    }

    @Test func urlSessionOnLinuxRefusesPinsInsteadOfIgnoringThem() throws {
        #if canImport(FoundationNetworking)
        let pins = try PublicKeyPins(["id.example.com": [Self.a, Self.b]])
        do {
            _ = try URLSessionTransport(configuration: .init(), pins: pins)
            Issue.record("a pinned URLSessionTransport was made on Linux, where nothing would check the pins")
        } catch {
            #expect(error.code == HTTPRequestError.pinning, "\(error)")
            #expect(
                error.message.contains("id.example.com") && error.message.contains("CurlTransport"), "\(error.message)")
        }
        _ = try URLSessionTransport(configuration: .init(), pins: PublicKeyPins()) // no pins: nothing to refuse
        #endif
    }
}

/// Pinning on a real TLS connection (libcurl, `CURLOPT_PINNEDPUBLICKEY`) to a local HTTPS server
/// whose keys the test makes: a match, a mismatch (refused, named, never retried), a backup pin, a
/// rotated key; and pins that add to the CA check rather than replace it.
@Suite(.serialized)
struct CurlPinningTests {
    static func get(_ server: TLSTestServer, _ transport: CurlTransport, attempts: Int = 3) async throws -> APIResponse
    {
        let client = APIClient(
            transport: transport, retryPolicy: RetryPolicy(maxAttempts: attempts, backoff: .constant(0.05)))
        let request = APIRequest(url: server.url.appendingPathComponent("hello.json"), timeout: 10)
        return try await client.send(
            request, context: HTTPMiddlewareContext(isRetryable: true, requiresAuthentication: false))
    }

    static func refusal(_ server: TLSTestServer, _ transport: CurlTransport) async throws -> HTTPRequestError {
        do {
            let response = try await get(server, transport)
            Issue.record("the request went through: \(response.status)")
            throw CancellationError()
        } catch let error as HTTPRequestError {
            return error
        }
    }

    @Test func pinsMatchRefuseRotateAndNeverReplaceTheCACheck() async throws {
        let ca = try await TLSTestCA.make()
        defer { ca.remove() }
        let first = try await ca.issue("first"), backup = try await ca.issue("backup"),
            rotated = try await ca.issue("rotated", rsa: true)
        let server = try await ca.serve(first)
        var servers = [server]
        defer { for server in servers { Task { await server.stop() } } }
        let pinned = { (pins: [String]) throws -> CurlTransport in
            CurlTransport(caFile: ca.caFile, pins: try PublicKeyPins(["127.0.0.1": pins]))
        }

        // The pin matches: the request goes through.
        let matched = try await Self.get(server, pinned([first.pin]))
        #expect(matched.status.code == 200 && String(decoding: matched.body, as: UTF8.self).contains("pinned"))
        #expect(try server.counts().connections == 1 && server.counts().requests == 1)

        // Another key: a TLS error that names the host and the pins, sent once though three attempts were allowed.
        let refused = try await Self.refusal(server, pinned([backup.pin]))
        #expect(refused.code == HTTPRequestError.tls, "\(refused)")
        #expect(
            refused.message
                == "the server's public key for 127.0.0.1 is not one of the pinned keys (pins: \(backup.pin)); "
                + "the connection was refused", "\(refused.message)")
        let counts = try server.counts()
        #expect(counts.connections == 2 && counts.requests == 1, "one connection, no request, no retry: \(counts)")

        // A backup pin: the first pin is wrong, the second right.
        let viaBackup = try await Self.get(server, pinned([backup.pin, first.pin]))
        #expect(viaBackup.status.code == 200)

        // Pins for another host leave this one unpinned.
        let otherHost = CurlTransport(caFile: ca.caFile, pins: try PublicKeyPins(["localhost": [backup.pin]]))
        #expect(try await Self.get(server, otherHost).status.code == 200)

        // A pin adds to the CA check: the right pin without the CA is still an untrusted certificate.
        let untrusted = try await Self.refusal(
            server, CurlTransport(pins: try PublicKeyPins(["127.0.0.1": [first.pin]])))
        #expect(untrusted.code == HTTPRequestError.tls && !untrusted.message.contains("pinned"), "\(untrusted.message)")

        // The key rotated (a new server key for the same host): old + new pins pass, the old alone is refused.
        await server.stop()
        let next = try await ca.serve(rotated)
        servers = [next]
        #expect(try await Self.get(next, pinned([first.pin, rotated.pin])).status.code == 200)
        let stale = try await Self.refusal(next, pinned([first.pin]))
        #expect(
            stale.code == HTTPRequestError.tls
                && stale.message.contains("is not one of the pinned keys (pins: \(first.pin))"),
            "\(stale.message)")
        let nextCounts = try next.counts()
        #expect(nextCounts.connections == 2 && nextCounts.requests == 1, "\(nextCounts)")
    }
}
