#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Public-key pins per host: the SHA-256 digests of the server keys (their DER SubjectPublicKeyInfo)
/// a TLS connection to that host must present, in the format of HPKP (RFC 7469 §2.4) and curl's
/// `--pinnedpubkey`: `sha256//` and the standard base64 of the 32-byte digest.
///
/// A pin is checked *in addition to* the normal certificate verification (the CA chain, the
/// host name, the dates), never instead of it. A connection whose leaf certificate's key matches
/// none of the host's pins fails with `HTTPRequestError.tls` and is never retried. Hosts without
/// pins are not pinned.
///
/// Give each host at least two pins: the key in use and a backup key kept offline (RFC 7469 §4.3),
/// so that a lost or compromised key can be replaced without locking every client out. One pin is
/// accepted, but a key rotation then needs a new release of every client first.
///
/// ```swift
/// let pins = try PublicKeyPins(["id.example.com": ["sha256//r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E=",
///                                                  "sha256//YLh1dUR9y6Kja30RrAn7JKnbQG/uEtLMkBgFF2Fuihg="]])
/// let transport = CurlTransport(pins: pins)
/// ```
///
/// A pin for a server's key: `openssl x509 -in server.pem -pubkey -noout | openssl pkey -pubin -outform DER
/// | openssl dgst -sha256 -binary | base64`.
public struct PublicKeyPins: Sendable, Hashable, CustomStringConvertible {
    /// The most hosts one set of pins names (hostile configuration is bounded).
    public static let maximumHosts = 64
    /// The most pins one host has.
    public static let maximumPinsPerHost = 16

    /// Normalised host → canonical base64 digests, in the order given, without repeats.
    private let digests: [String: [String]]

    /// No pins: nothing is pinned.
    public init() { digests = [:] }

    /// Pins from host → pins. A host is a DNS name or an IP address (IPv6 with or without brackets),
    /// compared exactly after lower-casing ASCII and dropping a trailing dot; wildcards are refused.
    /// A pin is `sha256//BASE64` (or the bare base64, as in HPKP's `pin-sha256`).
    ///
    /// - Throws: `HTTPRequestError.pinning` naming the host or pin that is wrong: a host that is empty,
    ///   has a wildcard or a character outside a host name; a pin that is not standard base64, not of
    ///   32 bytes, or not SHA-256; a host without pins; more than `maximumHosts` hosts or
    ///   `maximumPinsPerHost` pins for one host.
    public init(_ pins: [String: [String]]) throws(HTTPRequestError) {
        guard pins.count <= Self.maximumHosts else {
            throw HTTPRequestError(
                HTTPRequestError.pinning, "at most \(Self.maximumHosts) hosts can be pinned (\(pins.count) given)")
        }
        var digests: [String: [String]] = [:]
        for (host, list) in pins {
            let name = try Self.host(host)
            guard !list.isEmpty else {
                throw HTTPRequestError(HTTPRequestError.pinning, "the pinned host \(name) has no pins")
            }
            guard list.count <= Self.maximumPinsPerHost else {
                throw HTTPRequestError(
                    HTTPRequestError.pinning,
                    "at most \(Self.maximumPinsPerHost) pins per host (\(name) has \(list.count))")
            }
            var canonical = digests[name] ?? []
            for digest in try Self.digests(list) where !canonical.contains(digest) { canonical.append(digest) }
            digests[name] = canonical
        }
        self.digests = digests
    }

    /// The pins for one host, checked as `init(_:)` checks them — at least one, at most
    /// `maximumPinsPerHost`, each `sha256//BASE64` (or the bare base64) of 32 bytes — and written
    /// canonically (`sha256//BASE64`, a repeated pin once): for checking a pin's form before the host
    /// it pins is known.
    ///
    /// - Parameter pins: the pins as given.
    /// - Returns: the canonical pins, in the order given.
    /// - Throws: `HTTPRequestError.pinning` naming the pin that is wrong, or the count.
    public static func canonical(_ pins: [String]) throws(HTTPRequestError) -> [String] {
        try digests(pins).map { "sha256//" + $0 }
    }

    /// The base64 digests of `pins` (`canonical(_:)` without the `sha256//`).
    static func digests(_ pins: [String]) throws(HTTPRequestError) -> [String] {
        guard !pins.isEmpty, pins.count <= maximumPinsPerHost else {
            throw HTTPRequestError(
                HTTPRequestError.pinning, "give 1 to \(maximumPinsPerHost) pins for a host (\(pins.count) given)")
        }
        var canonical: [String] = []
        for pin in pins {
            let digest = try Self.digest(pin)
            if !canonical.contains(digest) { canonical.append(digest) }
        }
        return canonical
    }

    /// `true` when no host is pinned.
    public var isEmpty: Bool { digests.isEmpty }

    /// The pinned hosts, normalised (lower-case, no trailing dot, no brackets), sorted.
    public var hosts: [String] { digests.keys.sorted() }

    /// `host`'s pins as `sha256//BASE64`, or an empty array when `host` is not pinned. `host` is
    /// normalised as the initializer does (`ID.Example.COM.` finds `id.example.com`).
    public func pins(for host: String) -> [String] {
        (digests[Self.normalised(host)] ?? []).map { "sha256//" + $0 }
    }

    /// Whether a server of `host` whose key's SubjectPublicKeyInfo (DER) has the SHA-256 `digest`
    /// may be used: `true` when `host` is not pinned or `digest` is one of its pins.
    public func permits(host: String, subjectPublicKeyInfoSHA256 digest: [UInt8]) -> Bool {
        guard let pinned = digests[Self.normalised(host)] else { return true }
        let encoded = Data(digest).base64EncodedString()
        return pinned.contains { $0.utf8.elementsEqual(encoded.utf8) }
    }

    /// The DER SubjectPublicKeyInfo of an X.509 certificate given in DER (RFC 5280 §4.1: the seventh
    /// member of `tbsCertificate`, counting the optional version) — what a pin is the SHA-256 of — or nil
    /// when `certificateDER` is not a certificate (bounded: at most 64 KiB, lengths checked, never traps).
    ///
    /// For an app whose own `URLSession` delegate answers server-trust challenges: hash this with
    /// SHA-256 and ask `permits(host:subjectPublicKeyInfoSHA256:)`.
    public static func subjectPublicKeyInfo(certificateDER der: [UInt8]) -> [UInt8]? {
        guard der.count <= 64 * 1024, let certificate = element(der, at: 0, tag: 0x30, limit: der.count),
            let tbs = element(der, at: certificate.content, tag: 0x30, limit: certificate.end)
        else { return nil }
        var offset = tbs.content
        if let version = element(der, at: offset, tag: 0xA0, limit: tbs.end) { offset = version.end }
        // serialNumber INTEGER, signature AlgorithmIdentifier, issuer Name, validity, subject Name.
        for tag: UInt8 in [0x02, 0x30, 0x30, 0x30, 0x30] {
            guard let member = element(der, at: offset, tag: tag, limit: tbs.end) else { return nil }
            offset = member.end
        }
        guard let key = element(der, at: offset, tag: 0x30, limit: tbs.end) else { return nil }
        return Array(der[key.start..<key.end])
    }

    /// The DER element at `offset` if its tag is `tag` and it ends by `limit`: where it starts, where
    /// its contents start, where it ends. Definite lengths of at most three length bytes.
    private static func element(_ bytes: [UInt8], at offset: Int, tag: UInt8, limit: Int) -> (
        start: Int, content: Int, end: Int
    )? {
        guard limit <= bytes.count, offset >= 0, offset + 2 <= limit, bytes[offset] == tag else { return nil }
        let first = bytes[offset + 1]
        var length = Int(first), header = 2
        if first >= 0x80 {
            let count = Int(first & 0x7F)
            guard count >= 1, count <= 3, offset + 2 + count <= limit else { return nil }
            length = 0
            for index in 0..<count { length = length << 8 | Int(bytes[offset + 2 + index]) }
            header += count
        }
        let end = offset + header + length
        guard end <= limit else { return nil }
        return (offset, offset + header, end)
    }

    /// `host: sha256//…, sha256//…; …` (pins are public values, never secrets).
    public var description: String {
        hosts.map { "\($0): " + pins(for: $0).joined(separator: ", ") }.joined(separator: "; ")
    }

    /// curl's `CURLOPT_PINNEDPUBLICKEY` value for `host` (`sha256//A;sha256//B`), or nil when it is not pinned.
    package func curlPinnedPublicKey(for host: String) -> String? {
        let pins = pins(for: host)
        return pins.isEmpty ? nil : pins.joined(separator: ";")
    }

    /// The error for a server of `host` whose key is none of its pins: a TLS error, never retried.
    package func mismatch(host: String, _ request: APIRequest) -> HTTPRequestError {
        HTTPRequestError(
            HTTPRequestError.tls, Self.mismatchMessage(host: host, pins: pins(for: host)),
            method: request.method, url: request.redactedURL)
    }

    /// "the server's public key for HOST is not one of the pinned keys (pins: …); the connection was refused".
    package static func mismatchMessage(host: String, pins: [String]) -> String {
        "the server's public key for \(normalised(host)) is not one of the pinned keys (pins: \(pins.joined(separator: ", "))); "
            + "the connection was refused"
    }

    /// `host` lower-cased (ASCII), without a trailing dot or IPv6 brackets: how hosts are compared.
    package static func normalised(_ host: String) -> String {
        var bytes = Array(host.utf8)
        if bytes.first == UInt8(ascii: "["), bytes.last == UInt8(ascii: "]") {
            bytes = Array(bytes.dropFirst().dropLast())
        }
        if bytes.last == UInt8(ascii: ".") { bytes.removeLast() }
        return String(decoding: bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// A pinned host checked and normalised.
    static func host(_ text: String) throws(HTTPRequestError) -> String {
        let name = normalised(text)
        guard !name.isEmpty, name.utf8.count <= 253 else {
            throw HTTPRequestError(
                HTTPRequestError.pinning,
                "a pinned host must be a host name or an IP address (\(name.utf8.count) bytes given)")
        }
        guard !name.utf8.contains(UInt8(ascii: "*")) else {
            throw HTTPRequestError(
                HTTPRequestError.pinning, "the pinned host \(name) has a wildcard: pins name each host exactly")
        }
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == UInt8(ascii: "-")
                || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: ":")
        }
        guard allowed else {
            throw HTTPRequestError(
                HTTPRequestError.pinning,
                "the pinned host \(shown(name)) is not a host name or an IP address (letters, digits, '-', '.', ':'; an IDN in its xn-- form)"
            )
        }
        return name
    }

    /// A pin's canonical base64, checked: `sha256//` (optional) and the standard base64 of 32 bytes.
    static func digest(_ pin: String) throws(HTTPRequestError) -> String {
        var text = Substring(pin)
        if text.hasPrefix("sha256//") {
            text = text.dropFirst(8)
        } else if let slash = text.firstIndex(of: "/"), text[slash...].hasPrefix("//") {
            throw HTTPRequestError(
                HTTPRequestError.pinning,
                "the pin \(shown(String(pin.prefix(80)))) uses \(shown(String(text[..<slash].prefix(16)))); only sha256// pins are supported"
            )
        }
        let shown = shown(String(pin.prefix(80)))
        guard text.utf8.count <= 64, let data = Data(base64Encoded: String(text)) else {
            throw HTTPRequestError(
                HTTPRequestError.pinning, "the pin \(shown) is not standard base64 (sha256//BASE64, 44 characters)")
        }
        guard data.count == 32 else {
            throw HTTPRequestError(
                HTTPRequestError.pinning, "the pin \(shown) has \(data.count) bytes; a SHA-256 pin has 32")
        }
        let canonical = data.base64EncodedString()
        guard canonical.utf8.elementsEqual(text.utf8) else {
            throw HTTPRequestError(
                HTTPRequestError.pinning, "the pin \(shown) is not canonical base64 (expected sha256//\(canonical))")
        }
        return canonical
    }

    /// `text` with every character outside printable ASCII shown as `\u{XX}` (configuration is outside input
    /// and goes into error messages a terminal prints).
    static func shown(_ text: String) -> String {
        text.unicodeScalars.map {
            $0.value >= 0x20 && $0.value < 0x7F ? String($0) : "\\u{\(String($0.value, radix: 16))}"
        }.joined()
    }
}
