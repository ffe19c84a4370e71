// libFuzzer harnesses for every parser that sees outside bytes. Built by tools/fuzz/run only
// (MOOSE_FUZZ=1 adds this target to Package.swift), with -sanitize=fuzzer,address; the harness is
// chosen with MOOSE_FUZZ_TARGET. Each asserts properties, not just "no crash": a broken property
// is a trap (fatalError) that libFuzzer reports with the input that caused it.
import Foundation
import MooseCrypto
import MooseHTTP
import HTTPTypes
import MooseJWT
import MooseOAuth
import MooseOAuthSystem
import MooseCLI
import MooseMCP
import MooseSealing
import MooseResourceServer
import MooseTesting

/// The harnesses, by name.
let harnesses: [String: @Sendable ([UInt8]) -> Void] = [
    "base64url": base64url, "json": json, "jws": jws, "jwk": jwk, "token-response": tokenResponse,
    "discovery": discovery, "userinfo": userinfo, "www-authenticate": wwwAuthenticate, "http-date": httpDate,
    "loopback-request": loopbackRequest, "curl-headers": curlHeaders, "store-envelope": storeEnvelope,
    "form": form, "redaction": redaction, "dpop-par-response": dpopParResponse,
    "config-file": configFile,
    "protected-resource": protectedResource, "registration-response": registrationResponse, "duration": duration,
    "sse": serverSentEvents,
    "paste": pastedRedirect, "workload-token": workloadToken, "public-key-pins": publicKeyPins,
    "dpop-proof": dpopProof, "introspection": introspection, "cache-control": cacheControl,
    "http-request": httpRequest, "session-plan": sessionPlan, "plain-url": plainURL,
    "git-credential": gitCredential, "docker-credential": dockerCredential, "exec-info": execInfo,
    "inspect-report": inspectReport, "verification-input": verificationInput
]

let selected: @Sendable ([UInt8]) -> Void = {
    let name = ProcessInfo.processInfo.environment["MOOSE_FUZZ_TARGET"] ?? ""
    guard let harness = harnesses[name] else {
        fatalError("MOOSE_FUZZ_TARGET must be one of: \(harnesses.keys.sorted().joined(separator: " "))")
    }
    return harness
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    selected(bytes)
    return 0
}

/// libFuzzer's driver (from the -sanitize=fuzzer runtime).
@_silgen_name("LLVMFuzzerRunDriver")
func runDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

/// SwiftPM links an executable target's entry point as `<Module>_main` (its "testable executable"
/// convention on Linux) in place of libFuzzer's own `main`: hand over to libFuzzer's driver.
@_cdecl("MooseFuzz_main")
public func mooseFuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc
    var arguments = argv
    return withUnsafeMutablePointer(to: &count) { countPointer in
        withUnsafeMutablePointer(to: &arguments) { argumentsPointer in
            runDriver(countPointer, argumentsPointer) { data, size in fuzzOne(data, size) }
        }
    }
}

func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("property broken: \(message())") }
}

func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

// MARK: - MooseJWT

func base64url(_ bytes: [UInt8]) {
    // Deliberate: decoding what encode made cannot throw; if it does, the crash is the finding.
    // swift-format-ignore: NeverUseForceTry
    require(try! Base64URL.decode(Base64URL.encode(bytes)) == bytes, "decode(encode(x)) == x")
    let input = text(bytes)
    if let decoded = try? Base64URL.decode(input) {
        require(
            Base64URL.encode(decoded).utf8.elementsEqual(input.utf8), "a strictly decoded input re-encodes to itself")
    }
}

func json(_ bytes: [UInt8]) {
    guard let value = try? JSONValue(parsing: bytes) else { return }
    let again = try? JSONValue(parsing: Array(value.serialized().utf8))
    require(again == value, "parse(serialize(v)) == v")
    // Byte for byte (String == would equate canonically equivalent spellings).
    require(
        again.map { Array($0.serialized().utf8) } == Array(value.serialized().utf8),
        "serialize(parse(serialize(v))) == serialize(v)")
    // Serialized text never carries a raw control or bidi character (terminal-safe).
    require(
        !value.serialized().unicodeScalars.contains {
            $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0.value == 0x202E
        },
        "serialized JSON escapes control characters")
}

let hmacKey = JWTKey(secret: Array(repeating: UInt8(42), count: 32))
// Deliberate: a fixed key that cannot be refused; the harness stops at once if it is.
// swift-format-ignore: NeverUseForceTry
let signer = try! JWTSigner(key: hmacKey, algorithm: .hs256)
let verifier = JWTVerifier(
    keys: [hmacKey], allowedAlgorithms: [.hs256],
    validation: ClaimValidation(acceptsAnyAudience: true, checksTime: false))

func jws(_ bytes: [UInt8]) {
    // The input as a token (anyone can send one).
    let token = text(bytes)
    _ = try? JWS(compact: token)
    _ = try? JWT(compact: token)
    if let report = try? TokenInspection(token, verifier: verifier, validation: verifier.validation),
        report.verdict == .valid
    {
        require(report.claims != nil, "a valid verdict has a claims object")
    }
    // The input as a payload, signed by us: the verdict is valid only for a JSON object.
    guard let signed = try? signer.sign(payload: bytes) else { return }
    let report = try? TokenInspection(signed, verifier: verifier, validation: verifier.validation)
    let isObject: Bool = {
        if case .object? = try? JSONValue(parsing: bytes) { return true }; return false
    }()
    if report?.verdict == .valid { require(isObject, "a non-object payload was judged valid") }
    let verified = try? verifier.verify(signed)
    if verified != nil { require(isObject, "the verifier accepted a non-object payload") }
    // The inspection and the verifier agree (one is a diagnostic view of the other).
    require((report?.verdict == .valid) == (verified != nil), "TokenInspection and JWTVerifier disagree")
    if case .object(let object)? = try? JSONValue(parsing: bytes), (try? JWTClaims(object)) != nil {
        // Tokens over JWS.defaultMaximumSize are refused by design; everything else verifies.
        if signed.utf8.count <= JWS.defaultMaximumSize {
            require(verified != nil, "verify(sign(claims)) succeeds")
            require(verified?.claims.fields == object, "verify(sign(claims)).claims == claims")
        }
    }
}

func jwk(_ bytes: [UInt8]) {
    var keys: [JWK] = []
    if let set = try? JWKS(json: bytes) { keys += set.keys }
    if let single = try? JWK(json: text(bytes)) { keys.append(single) }
    for key in keys {
        let thumbprint = try? key.thumbprint()
        require((try? key.thumbprint()) == thumbprint, "the thumbprint is deterministic")
        _ = try? key.thumbprint(hash: .sha384)
        _ = try? key.verificationKey()
        // The public form never carries private material.
        require(!key.publicJWK.hasPrivateMaterial, "publicJWK has private material")
        if let thumbprint, key.keyType != "oct" {
            require((try? key.publicJWK.thumbprint()) == thumbprint, "a key and its public form share a thumbprint")
        }
    }
}

/// `InspectionReport` of anyone's token, and of the input signed as a payload under a header whose
/// `kid` is the input: the text holds no control character but newlines and tabs (and, colored, the
/// ESC of our own SGR sequences), no line separator and no bidirectional control; the JSON parses back
/// to itself; the verdict is `invalid` exactly when there are failures, and decoding alone never fails
/// on more than a verification does.
func inspectReport(_ bytes: [UInt8]) {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    var tokens = [text(bytes)]
    if let signed = try? signer.sign(payload: bytes, extraHeader: ["kid": .string(text(bytes))]) {
        tokens.append(signed)
    }
    for token in tokens {
        guard let inspection = try? TokenInspection(token, verifier: verifier, validation: verifier.validation) else {
            continue
        }
        let verified = InspectionReport(inspection, now: now)
        let decoded = InspectionReport(inspection, now: now, mode: .decodeOnly)
        require(decoded.failures.count <= verified.failures.count, "decoding alone fails on no more")
        for report in [verified, decoded] {
            require((report.verdict == .invalid) == !report.failures.isEmpty, "invalid exactly with failures")
            for (output, colored) in [(report.text(), false), (report.text(color: true), true)] {
                let scalars = Array(output.unicodeScalars)
                for (index, scalar) in scalars.enumerated() {
                    let value = scalar.value
                    if value == 0x1B {
                        require(colored && index + 1 < scalars.count && scalars[index + 1] == "[", "an ESC of ours")
                        continue
                    }
                    let control = (value < 0x20 && value != 0x0A && value != 0x09) || (0x7F...0x9F).contains(value)
                    require(!control, "U+\(String(value, radix: 16)) reached the text")
                    require(
                        !(0x2028...0x2029).contains(value) && !JSONValue.isBidiControl(value), "a separator or bidi")
                }
            }
            let json = report.json
            require((try? JSONValue(parsing: Array(json.serialized().utf8))) == json, "the JSON parses back")
        }
    }
}

/// Key files and tokens as people hand them over: `VerificationKeys.keyFile` and `jwks` either give
/// keys whose default allow-list is of their own type only (never HMAC for a public key), or an
/// `unusableKey` input error; `PresentedToken.text` gives a non-empty token without surrounding
/// whitespace, which reads back to itself unless it still starts with another "Bearer ".
func verificationInput(_ bytes: [UInt8]) {
    // Called one by one: a typed-throws static function taken as a value crashes Swift 6.3.1's SILGen.
    for asJWKS in [false, true] {
        do throws(VerificationInputError) {
            let loaded =
                asJWKS
                ? try VerificationKeys.jwks(bytes, source: "fuzz") : try VerificationKeys.keyFile(bytes, source: "fuzz")
            for key in loaded.keys {
                require(key.verifiableAlgorithms.allSatisfy { $0.keyFamily == key.family }, "no algorithm confusion")
            }
        } catch {
            require(error.code == VerificationInputError.unusableKey && error.isInputError, "unusableKey: \(error)")
        }
    }
    do throws(VerificationInputError) {
        let token = try PresentedToken.text(from: bytes)
        require(!token.isEmpty, "a token is not empty")
        require(token.first?.isWhitespace == false && token.last?.isWhitespace == false, "trimmed")
        if !token.lowercased().hasPrefix("bearer ") {
            require((try? PresentedToken.text(from: Array(token.utf8))) == token, "reads back to itself")
        }
    } catch {
        require(error.code == VerificationInputError.unusableToken, "unusableToken: \(error)")
    }
}

// MARK: - MooseOAuth

/// Input layout: byte 0 picks the status, byte 1 is the length (mod 64) of a raw header block that
/// follows, the rest is the body.
func tokenResponse(_ bytes: [UInt8]) {
    guard bytes.count >= 2 else { return }
    let status = [200, 201, 400, 401, 429, 500, 503, 302][Int(bytes[0]) % 8]
    let headerLength = min(Int(bytes[1]) % 64, bytes.count - 2)
    let headers = CurlTransport.parseHeaders(Array(bytes[2..<(2 + headerLength)]))
    let body = Array(bytes[(2 + headerLength)...])
    let requestedAt = Date(timeIntervalSince1970: 1_000)
    func parse(_ body: [UInt8]) throws -> TokenSet {
        try TokenResponse.parse(
            APIResponse(status: HTTPResponse.Status(code: status), headerFields: headers, body: Data(body)),
            requestedAt: requestedAt,
            requestedScopes: ["openid"])
    }
    // The same body with every token member's string value replaced by a canary: neither an error
    // message nor TokenSet.description may show it (fingerprints only; OAuth excerpts never quote values).
    if case .object(let object)? = try? JSONValue(parsing: body), !text(body).contains("CANARY") {
        let secretNames: Set<String> = ["access_token", "refresh_token", "id_token"]
        let canaried = JSONObject(
            object.map { member in
                (
                    member.key,
                    secretNames.contains(member.key) && member.value.stringValue != nil
                        ? .string("CANARYq7Zx9") : member.value
                )
            })
        do {
            let tokens = try parse(Array(JSONValue.object(canaried).serialized().utf8))
            require(tokens.accessToken == "CANARYq7Zx9", "the access token is the body's")
            require(!tokens.description.contains("CANARY"), "TokenSet.description shows a token: \(tokens.description)")
        } catch {
            require(!String(describing: error).contains("CANARY"), "an error message quotes a token: \(error)")
        }
    }
    guard let tokens = try? parse(body) else { return }
    require(!tokens.accessToken.isEmpty, "an access token is never empty")
    if let expiry = tokens.expiresAt?.timeIntervalSince1970 {
        require(
            expiry.isFinite && expiry >= 1_000 && expiry <= 1_000 + TokenSet.maximumLifetime,
            "expiry is finite and bounded")
    }
    require(TokenCharacters.isVisibleASCII(tokens.accessToken), "the access token is VSCHAR")
    require(TokenCharacters.isHTTPToken(tokens.tokenType), "the token type is an HTTP token")
    _ = tokens.description
}

func discovery(_ bytes: [UInt8]) {
    let issuer = "https://id.example.com"
    for kind in [Discovery.DocumentKind.openIDConnect, .authorizationServer] {
        guard let metadata = try? Discovery.parseDocument(bytes, issuer: issuer, kind: kind) else { continue }
        require(metadata.issuer.utf8.elementsEqual(issuer.utf8), "the issuer matches byte for byte")
        // Two JSON parsers read the document (JSONValue for the checks, JSONDecoder for the fields): they agree on the issuer.
        if case .object(let object)? = try? JSONValue(parsing: bytes) {
            require(
                object["issuer"]?.stringValue.map { $0.utf8.elementsEqual(issuer.utf8) } == true,
                "JSONValue and JSONDecoder disagree on issuer")
        }
        if (try? metadata.checkTransportSecurity()) != nil {
            require(
                metadata.namedEndpoints.allSatisfy { $0.1.map(TransportSecurity.permits) ?? true },
                "every endpoint is https or loopback")
        }
    }
}

func userinfo(_ bytes: [UInt8]) {
    if let claims = try? OAuthClient.parseUserInfo(bytes, expectedSubject: "alice") {
        require(
            claims["sub"]?.stringValue.map { $0.utf8.elementsEqual("alice".utf8) } == true, "sub matches byte for byte")
    }
    if let claims = try? OAuthClient.parseUserInfo(bytes, expectedSubject: nil) {
        require(claims["sub"]?.stringValue != nil, "a UserInfo response always has a string sub")
    }
}

func loopbackRequest(_ bytes: [UInt8]) {
    guard let target = LoopbackReceiver.requestTarget(fromHead: bytes) else { return }
    require(
        target.hasPrefix("/") && target.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7E },
        "a target is printable origin-form")
}

// MARK: - MooseHTTP

func wwwAuthenticate(_ bytes: [UInt8]) {
    let challenges = AuthenticationChallenge.parse(text(bytes))
    require(challenges.count <= 64, "at most 64 challenges")
    require(
        challenges.allSatisfy { !$0.scheme.isEmpty && $0.parameters.count <= 64 },
        "schemes are non-empty, parameters bounded")
    require(challenges.allSatisfy { TokenCharacters.isHTTPToken($0.scheme) }, "every scheme is an RFC 9110 token")
    require(
        challenges.allSatisfy { $0.parameters.allSatisfy { TokenCharacters.isHTTPToken($0.name) } },
        "every parameter name is a token")
    // A header repeated (one value per line) keeps the same bound.
    require(
        AuthenticationChallenge.parse([text(bytes), text(bytes)]).count <= 64,
        "at most 64 challenges over repeated headers")
}

/// A JWKS response's `Cache-Control` (its `max-age` bounds how long the issuer's keys are trusted):
/// never traps, and any answer is a whole number of seconds within 0…999 999 999, the same every time.
func cacheControl(_ bytes: [UInt8]) {
    let input = text(bytes)
    let age = JWKSCache.maximumAge(cacheControl: input)
    if let age {
        require(age.isFinite && age >= 0 && age <= 999_999_999 && age == age.rounded(), "max-age is bounded and whole")
    }
    require(JWKSCache.maximumAge(cacheControl: input) == age, "the same value twice")
}

/// A raw HTTP/1.1 request as MooseTesting's `LoopbackHTTPServer` (a test provider on a loopback port)
/// reads it. Properties: the head parser never traps and refuses with a known status; a head at its
/// bound is never "incomplete"; the incremental end-of-head search agrees with a search from the start;
/// a parsed head is origin-form and printable, its fields at most 100 tokens with values free of CR,
/// LF and NUL and of surrounding whitespace, within 16 KiB; it parses the same without the bytes after
/// it, and written back out canonically parses to itself; a request made from it keeps the target as
/// its path; a chunked body decodes the same however it is split, and never past its limit.
func httpRequest(_ bytes: [UInt8]) {
    typealias Server = LoopbackHTTPServer
    let end = Server.headEnd(in: bytes, from: 0)
    let split = bytes.isEmpty ? 0 : Int(bytes[bytes.count / 2]) * bytes.count / 256
    if Server.headEnd(in: Array(bytes[..<split]), from: 0) == nil {
        require(Server.headEnd(in: bytes, from: split) == end, "the incremental search finds the same end")
    }
    let head: Server.RequestHead
    switch Server.parseRequestHead(bytes) {
    case .failure(.incomplete):
        require(end == nil && bytes.count < Server.maximumHeadBytes, "only a short head without its end is incomplete")
        return
    case .failure(.refused(let status, _)):
        require([400, 417, 431, 501, 505].contains(status), "a refusal is 400, 417, 431, 501 or 505")
        return
    case .success(let parsed):
        head = parsed
    }
    require(head.length == end && head.length <= Server.maximumHeadBytes, "the head ends at its blank line, bounded")
    require(
        head.target.hasPrefix("/") && head.target.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 0x23 },
        "the target is printable origin-form")
    require(HTTPRequest.Method(head.method) != nil, "the method is a token")
    require(head.minorVersion == 0 || head.minorVersion == 1, "HTTP/1.0 or 1.1")
    require(head.fields.count <= Server.maximumFieldCount, "at most 100 fields")
    for field in head.fields {
        require(HTTPField.Name(field.name) != nil, "a field name is a token")
        require(
            !field.value.contains(0x0D) && !field.value.contains(0x0A) && !field.value.contains(0), "no CR, LF, NUL")
        require(
            field.value.first.map { $0 != 0x20 && $0 != 0x09 } ?? true
                && field.value.last.map { $0 != 0x20 && $0 != 0x09 } ?? true, "a value is trimmed")
    }
    if case .length(let length) = head.framing { require(length >= 0, "a length is not negative") }
    require(
        (try? Server.parseRequestHead(Array(bytes[..<head.length])).get()) == head, "the head alone parses the same")
    var canonical = Array("\(head.method) \(head.target) HTTP/1.\(head.minorVersion)\r\n".utf8)
    for field in head.fields { canonical += Array("\(field.name): ".utf8) + field.value + [0x0D, 0x0A] }
    canonical += [0x0D, 0x0A]
    var reparsed = try? Server.parseRequestHead(canonical).get()
    reparsed?.length = head.length
    require(reparsed == head, "written back out, the head parses to itself")
    if let request = Server.makeRequest(head, body: nil, port: 8080) {
        require(request.head.path == head.target && request.url != nil, "the request keeps the target as its path")
    }
    guard head.framing == .chunked else { return }
    let rest = Array(bytes[head.length...])
    let cut = rest.isEmpty ? 0 : Int(rest[0]) % (rest.count + 1)
    var whole = Server.ChunkedDecoder(limit: 4096)
    let wholeResult = whole.feed(rest)
    var pieces = Server.ChunkedDecoder(limit: 4096)
    let piecesResult = pieces.feed(rest[..<cut]).flatMap { first in
        // A body complete within the first piece leaves the second alone.
        pieces.isComplete ? .success(first) : pieces.feed(rest[cut...]).map { first + $0 }
    }
    require(wholeResult == piecesResult, "the same result however the body is split")
    require(whole.body == pieces.body && whole.isComplete == pieces.isComplete, "the same body however it is split")
    require(whole.body.count <= 4096, "never more than the limit")
}

func httpDate(_ bytes: [UInt8]) {
    let input = text(bytes)
    if let date = HTTPDate.parse(input) {
        // Years 1...9999 (IMF-fixdate has four digits); a parsed "31 Dec 9999 23:59:60" lands in 10000.
        let seconds = date.timeIntervalSince1970
        require(seconds.isFinite, "a parsed date is finite")
        if seconds >= -62_135_596_800, seconds <= 253_402_300_799 {
            require(HTTPDate.parse(HTTPDate.format(date)) == date, "parse(format(d)) == d")
        }
    }
    if let delay = RetryPolicy.retryAfter(input, now: Date(timeIntervalSince1970: 1_800_000_000)) {
        require(delay.isFinite && delay >= 0 && delay <= RetryPolicy.maximumRetryAfterValue, "Retry-After is bounded")
    }
}

/// `moose token --min-validity`: any text is a bounded duration or nil; what `describe` prints of
/// a whole number of seconds parses back to it.
func duration(_ bytes: [UInt8]) {
    guard let seconds = DurationText.parse(text(bytes)) else { return }
    require(seconds.isFinite && seconds >= 0 && seconds <= DurationText.maximumParsed, "a parsed duration is bounded")
    let whole = seconds.rounded(.down)
    if whole == seconds, whole < 86_400 * 100 {
        let described = DurationText.describe(whole).replacingOccurrences(of: " ", with: "")
        // describe keeps the two largest units: it round-trips when nothing smaller was dropped.
        if let again = DurationText.parse(described), again != whole {
            require(again < whole, "describe never makes a duration longer")
        }
    }
}

func curlHeaders(_ bytes: [UInt8]) {
    let headers = CurlTransport.parseHeaders(bytes)
    for field in headers {
        let name = Array(field.name.rawName.utf8), value = Array(field.value.utf8)
        require(!name.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 }, "no CR, LF or NUL in a name")
        require(!value.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 }, "no CR, LF or NUL in a value")
    }
    require(headers.count <= CurlTransport.maximumHeaderFields, "header count bounded")
}

func form(_ bytes: [UInt8]) {
    let fields = RequestBuilder.decodeForm(text(bytes))
    let again = RequestBuilder.decodeForm(RequestBuilder.encodeForm(fields))
    require(again.map { "\($0.0)=\($0.1)" } == fields.map { "\($0.0)=\($0.1)" }, "decode(encode(fields)) == fields")
}

func redaction(_ bytes: [UInt8]) {
    for shown in [Redaction.body(bytes), Redaction.body(bytes, showingValues: true)] {
        require(!shown.unicodeScalars.contains { $0.value < 0x20 && $0.value != 0x20 }, "no control characters quoted")
    }
    // A secret in a JSON body is never quoted.
    let secret = "S3CRET" + Base64URL.encode(Array(bytes.prefix(24))) + "zzzzzzzzzzzzzzzzzzzz"
    let body = Array(#"{"access_token":"\#(secret)","x":"\#(secret)"}"#.utf8)
    require(
        !Redaction.body(body).contains("S3CRET") && !Redaction.body(body, showingValues: true).contains("S3CRET"),
        "a secret value was quoted")
}

// MARK: - MooseSealing (the stores' envelope)

let master = SecretKey(Array(repeating: UInt8(7), count: 32))
let dataKey = SecretKey(Array(repeating: UInt8(9), count: 32))
let storeID = Array(repeating: UInt8(1), count: 16)
// unchecked: one reusable AES-GCM context (a class, not Sendable); libFuzzer calls the harness on one thread.
// Deliberate: a fixed key that cannot be refused; the harness stops at once if it is.
// swift-format-ignore: NeverUseForceTry
nonisolated(unsafe) let dataCipher = try! AESGCM.Context(key: dataKey)

func storeEnvelope(_ bytes: [UInt8]) {
    // Random bytes never open as a wrapped data key or a sealed value (and never trap).
    require(
        (try? Envelope.unwrap(bytes, id: 1, master: master, storeID: storeID)) == nil,
        "random bytes unwrapped a data key")
    let aad = Envelope.valueAAD(storeID: storeID, namespace: "moose.session", name: "default", keyID: 1)
    require((try? dataCipher.openCombined(bytes, authenticating: aad)) == nil, "random bytes opened as a sealed value")
    // The store reads a row's blob in place (SecretStore's list/get path).
    let openedInPlace = bytes.withUnsafeBytes { try? dataCipher.openCombined(buffer: $0, authenticating: aad) }
    require(openedInPlace == nil, "random bytes opened in place as a sealed value")
    // What is sealed opens, only under its own name.
    guard let sealed = try? dataCipher.sealCombined(bytes, authenticating: aad) else { return }
    require((try? dataCipher.openCombined(sealed, authenticating: aad)) == bytes, "open(seal(x)) == x")
    let other = Envelope.valueAAD(storeID: storeID, namespace: "moose.session", name: "other", keyID: 1)
    require((try? dataCipher.openCombined(sealed, authenticating: other)) == nil, "a value opened under another name")
    if let wrapped = try? Envelope.wrap(dataKey, id: 1, master: master, storeID: storeID) {
        require(
            (try? Envelope.unwrap(wrapped, id: 2, master: master, storeID: storeID)) == nil,
            "a data key unwrapped under another id")
    }
}

/// A DPoP/PAR server answer: byte 0 picks the status, byte 1 the length (mod 64) of a raw header
/// block, the rest is the body. Properties: a nonce is remembered only when well-formed (NQCHAR,
/// ≤ 1 KiB); a request_uri comes back only as visible ASCII of at most 2 KiB; nothing traps.
func dpopParResponse(_ bytes: [UInt8]) {
    guard bytes.count >= 2 else { return }
    let status = [200, 201, 400, 401, 403, 500][Int(bytes[0]) % 6]
    let headerLength = min(Int(bytes[1]) % 64, bytes.count - 2)
    let headers = CurlTransport.parseHeaders(Array(bytes[2..<(2 + headerLength)]))
    let response = APIResponse(
        status: HTTPResponse.Status(code: status), headerFields: headers, body: Data(bytes[(2 + headerLength)...]))
    let url = URL(string: "https://fuzz.example/token")!
    _ = DPoPNonces.asksForNonce(response)
    DPoPNonces.remember(response, from: url)
    if let nonce = DPoPNonces.nonce(for: url) {
        require(
            !nonce.isEmpty && nonce.utf8.count <= 1024
                && nonce.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7E && $0 != 0x22 && $0 != 0x5C },
            "a remembered nonce is NQCHAR and bounded")
    }
    if let requestURI = try? PushedAuthorization.requestURI(from: response) {
        require(
            requestURI.utf8.count <= 2048 && TokenCharacters.isVisibleASCII(requestURI),
            "request_uri is bounded visible ASCII")
    }
}

/// moose's config file (a TOML subset). Properties: parsing never traps; a file that parses
/// serializes to text that parses back to the same configuration (every value quoted correctly); and
/// setting its default in place (`moose profile use`) gives a file that parses to the same
/// configuration with that default, for a name with quotes and a `#` in it — or, only where the
/// longer line, one more key or the larger file breaks one of the parser's limits, says which.
func configFile(_ bytes: [UInt8]) {
    guard var config = try? ProfileFile(parsing: bytes) else { return }
    do {
        let again = try ProfileFile(parsing: Array(config.serialized.utf8))
        require(again == config, "parse(serialize(config)) == config")
    } catch {
        require(false, "a serialized configuration does not parse: \(error)")
    }
    let name = "a \"b\" #c"
    config.defaultProfile = name
    do {
        let edited = try ProfileFile(parsing: try ProfileFile.settingDefault(name, in: bytes))
        require(edited == config, "settingDefault keeps the configuration and sets the default")
    } catch {
        let limits = ["the line is too long", "the file is larger than", "too many keys"]
        require(limits.contains { error.message.contains($0) }, "settingDefault refused a file it can edit: \(error)")
    }
}

// MARK: - Protected resources and registration (MCP authorization)

/// An RFC 9728 document, and the same bytes as a `WWW-Authenticate` value. Properties: a document
/// comes back only with the expected resource byte for byte, 1–32 https-or-loopback authorization
/// servers and valid scope-tokens; a challenge's scopes are valid scope-tokens (at most 64) and its
/// metadata URL is https or loopback.
func protectedResource(_ bytes: [UInt8]) {
    let expected = "https://mcp.example.com/mcp"
    if let metadata = try? ProtectedResourceMetadata.parse(bytes, expected: [expected]) {
        require(metadata.resource.utf8.elementsEqual(expected.utf8), "the resource matches byte for byte")
        require((1...32).contains(metadata.authorizationServers.count), "1 to 32 authorization servers")
        require(
            metadata.authorizationServers.allSatisfy { URL(string: $0).map(TransportSecurity.permits) == true },
            "every authorization server is https or loopback")
        require((metadata.scopesSupported ?? []).allSatisfy(ScopeToken.isValid), "every scope is a scope-token")
    }
    if let challenge = ResourceChallenge.parse([text(bytes)]) {
        require(
            (challenge.scopes ?? []).count <= 64 && (challenge.scopes ?? []).allSatisfy(ScopeToken.isValid),
            "challenge scopes are bounded scope-tokens")
        require(
            challenge.resourceMetadata.map(TransportSecurity.permits) ?? true,
            "a resource_metadata URL is https or loopback")
        require(challenge.error.map(ScopeToken.isValid) ?? true, "an error code is printable")
    }
}

/// An RFC 7591 registration answer: byte 0 picks the status, the rest is the body. Properties: a
/// client comes back only with a visible-ASCII client_id of at most 2 KiB, secrets of visible ASCII
/// (the registration access token a b64token), an https-or-loopback management URI; its description
/// never shows a secret.
func registrationResponse(_ bytes: [UInt8]) {
    guard let first = bytes.first else { return }
    let status = [200, 201, 400, 401, 500][Int(first) % 5]
    let response = APIResponse(status: HTTPResponse.Status(code: status), body: Data(bytes.dropFirst()))
    guard let client = try? ClientRegistration.parseResponse(response, issuer: "https://as.example.com") else { return }
    require(status == 200 || status == 201, "only a 200 or 201 registers")
    require(
        TokenCharacters.isVisibleASCII(client.clientID) && client.clientID.utf8.count <= 2048,
        "client_id is bounded visible ASCII")
    if let token = client.registrationAccessToken {
        require(TokenCharacters.isB64Token(token), "the registration access token can be a header")
        if token.utf8.count >= 12 {
            require(!client.description.contains(token), "the description shows no registration access token")
        }
    }
    if let secret = client.clientSecret {
        require(TokenCharacters.isVisibleASCII(secret), "the secret is visible ASCII")
        if secret.utf8.count >= 12 { require(!client.description.contains(secret), "the description shows no secret") }
    }
    require(
        client.registrationClientURI.map(TransportSecurity.permits) ?? true, "the management URI is https or loopback")
}

// MARK: - MCP servers' text/event-stream answers (MooseMCP)

/// Small limits, so the fuzzer reaches them.
let sseLimits = ServerSentEventParser.Limits(
    maximumLineLength: 512, maximumEventSize: 1024, maximumIDLength: 64, maximumRetry: 100_000)

/// Everything a parse produces, for comparing two parses.
struct SSEOutcome: Equatable {
    var events: [ServerSentEvent] = []
    var lastEventID = ""
    var retry: Int?
    var failure: ServerSentEventError?
    var discarded = false
}

func parseSSE(_ bytes: [UInt8], chunkSizes: [Int], limits: ServerSentEventParser.Limits) -> SSEOutcome {
    var parser = ServerSentEventParser(limits: limits)
    var outcome = SSEOutcome()
    var start = 0, index = 0
    while start < bytes.count {
        let end = min(bytes.count, start + max(1, chunkSizes[index % chunkSizes.count]))
        do {
            outcome.events += try parser.feed(bytes[start..<end])
        } catch {
            outcome.failure = error
            break
        }
        start = end
        index += 1
    }
    outcome.lastEventID = parser.lastEventID
    outcome.retry = parser.retry
    if outcome.failure == nil { outcome.discarded = parser.finish() }
    return outcome
}

func serverSentEvents(_ bytes: [UInt8]) {
    let whole = parseSSE(bytes, chunkSizes: [Int.max], limits: sseLimits)
    // The same stream in pieces (sizes 1…8 taken from the input itself): the same outcome — or, for
    // a stream over the limits, the same error (a failing feed hands back nothing of its chunk).
    let sizes = bytes.prefix(16).map { Int($0 % 8) + 1 }
    for chunked in [
        parseSSE(bytes, chunkSizes: sizes.isEmpty ? [1] : sizes, limits: sseLimits),
        parseSSE(bytes, chunkSizes: [1], limits: sseLimits)
    ] {
        if whole.failure == nil { require(chunked == whole, "chunking changes the outcome") }
        require(chunked.failure == whole.failure, "chunking changes the failure")
    }
    if let retry = whole.retry { require((0...sseLimits.maximumRetry).contains(retry), "retry out of bounds") }
    require(whole.lastEventID.utf8.count <= 3 * sseLimits.maximumIDLength, "an over-long id was kept")
    for event in whole.events {
        require(!event.type.isEmpty, "an event without a type")
        require(
            !event.type.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D })
                && !event.id.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 }),
            "a line end or NUL in a type or id")
        require(!event.data.utf8.contains(0x0D), "a CR in data (CR ends a line)")
        // Invalid bytes become U+FFFD (3 bytes): the decoded data is at most three times the limit.
        require(event.data.utf8.count <= 3 * sseLimits.maximumEventSize, "an event over its size limit")
    }
    guard whole.failure == nil else { return }
    // Written back out, the events parse to themselves (larger limits: decoding may have grown them).
    var text = ""
    for event in whole.events {
        text += "id: \(event.id)\nevent: \(event.type)\n"
        for line in event.data.split(separator: "\n", omittingEmptySubsequences: false) { text += "data: \(line)\n" }
        text += "\n"
    }
    let roomy = ServerSentEventParser.Limits(
        maximumLineLength: 4 * 1024, maximumEventSize: 4 * 1024, maximumIDLength: 4 * 64)
    let again = parseSSE(Array(text.utf8), chunkSizes: [Int.max], limits: roomy)
    require(again.failure == nil && again.events == whole.events, "parse(serialize(events)) != events")
}

/// `moose login --paste`: a pasted line becomes a redirect only when it is this login's redirect URI
/// (scheme, host, port, path) with this login's state, or a bare code; anything accepted is a URL
/// on that redirect URI whose state is this login's.
func pastedRedirect(_ bytes: [UInt8]) {
    guard let redirect = URL(string: "http://127.0.0.1:4711/callback") else { return }
    let line = String(decoding: bytes, as: UTF8.self)
    guard case .success(let url) = PastedRedirect.parse(line, redirectURI: redirect, expectedState: "st-1") else {
        return
    }
    let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
    // Scheme and host are case-insensitive (RFC 3986 §3.1, §3.2.2); port and path are exact.
    require(
        components?.scheme?.lowercased() == "http" && components?.host?.lowercased() == "127.0.0.1"
            && components?.port == 4711
            && components?.percentEncodedPath == "/callback", "an accepted paste is this login's redirect URI")
    require(
        components?.queryItems?.first { $0.name == "state" }?.value == "st-1",
        "an accepted paste carries this login's state")
}

/// A workload's token: accepted only with a compact JWS's shape, bounded, visible ASCII; a second
/// pass changes nothing.
func workloadToken(_ bytes: [UInt8]) {
    guard let token = WorkloadIdentity.compactJWS(String(decoding: bytes, as: UTF8.self)) else { return }
    require(token.utf8.count <= TokenCharacters.maximumTokenLength, "bounded")
    require(token.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "visible ASCII, no spaces")
    require(token.utf8.filter { $0 == UInt8(ascii: ".") }.count == 2, "three parts")
    require(WorkloadIdentity.compactJWS(token) == token, "idempotent")
}

/// Certificate pinning's parsers: the SPKI reader over a certificate's DER bytes, and a pin list
/// (`host` on the first line, pins on the next ones). The SPKI is a whole DER SEQUENCE lying inside the
/// input; accepted pins are canonical `sha256//` + 44 base64 characters, found again by their host.
func publicKeyPins(_ bytes: [UInt8]) {
    if let spki = PublicKeyPins.subjectPublicKeyInfo(certificateDER: bytes) {
        require(
            spki.count >= 2 && spki.count <= bytes.count && spki.first == 0x30,
            "the SPKI is a SEQUENCE within the input")
        require(bytes.count >= spki.count, "bounded by the input")
    }
    let lines = text(bytes).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    guard let host = lines.first, lines.count >= 2 else { return }
    guard let pins = try? PublicKeyPins([host: Array(lines.dropFirst())]) else { return }
    for pinned in pins.hosts {
        for pin in pins.pins(for: pinned) {
            require(pin.hasPrefix("sha256//") && pin.utf8.count == 52, "a canonical pin: \(pin.utf8.count) bytes")
        }
        require(!pins.pins(for: pinned).isEmpty, "a pinned host has pins")
    }
}

/// A stored session plan's JSON (`SessionPlan`, sealed with its session but read defensively) and an
/// issuer as a config file or `--issuer` gives it (`IssuerRule`). A plan that decodes is written in a
/// canonical form that decodes again to the same form; an issuer the rule passes parses as an http(s)
/// URL, and one it refuses is thrown by `check` with the problem's code.
func sessionPlan(_ bytes: [UInt8]) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    if let plan = try? JSONDecoder().decode(SessionPlan.self, from: Data(bytes)) {
        guard let written = try? encoder.encode(plan) else { fatalError("a plan that decodes is written") }
        guard let again = try? JSONDecoder().decode(SessionPlan.self, from: written) else {
            fatalError("a written plan decodes: \(String(decoding: written, as: UTF8.self))")
        }
        require((try? encoder.encode(again)) == written, "the written form is canonical")
        require(again.version == SessionPlan.currentVersion, "written as the current version")
    }
    let issuer = text(bytes)
    if let problem = IssuerRule.problem(issuer) {
        require(!problem.predicate.isEmpty, "a problem says what is wrong")
        do {
            try IssuerRule.check(issuer)
            fatalError("check passed an issuer the rule refuses")
        } catch let error as OAuthError {
            require(error.code == problem.code, "check throws the problem's code")
        } catch {
            fatalError("check throws OAuthError only: \(error)")
        }
    } else {
        guard let url = try? IssuerRule.check(issuer) else { fatalError("check refused an issuer the rule passes") }
        let scheme = url.scheme?.lowercased()
        require(scheme == "https" || scheme == "http", "an http(s) URL")
        require(url.query == nil && url.fragment == nil && url.user == nil, "no query, fragment or user")
    }
}

// MARK: - MooseResourceServer

/// A client's DPoP key, made once at start (the harness stops at once if it cannot be).
let (dpopClientSigner, dpopClientJWK): (JWTSigner, JWK) = {
    do {
        let key = try PrivateKey.generate(.ec(.p256))
        return (try JWTSigner(key: JWTKey(privateKey: key), algorithm: .es256), try JWK(publicKey: key.publicKey()))
    } catch {
        fatalError("cannot make the harness's DPoP key: \(error)")
    }
}()
let dpopNow = Date(timeIntervalSince1970: 1_800_000_000)
let dpopVerifier = DPoPProofVerifier(clock: { dpopNow })

/// DPoP proofs at a resource server (RFC 9449 §4.3). Byte 0 picks what the rest is:
/// 0 — a proof from anyone: an accepted one is for GET https://api.example.com/items, its thumbprint
///     is its jwk's, its jti bounded; 1 — a claim set signed by a client key with a proper header:
///     accepted only when htm is GET, htu normalizes to the request's, iat is in the window;
/// 2 — a URI: `DPoP.targetURI` is idempotent, printable ASCII, without query or fragment;
/// 3 — a challenge parameter value: the header value has no CR, LF or stray quote.
func dpopProof(_ bytes: [UInt8]) {
    guard let mode = bytes.first else { return }
    let rest = Array(bytes.dropFirst())
    let url = "https://api.example.com/items"
    switch mode % 4 {
    case 0:
        if let proof = try? dpopVerifier.verify(text(rest), method: "GET", url: url, accessToken: nil) {
            require(proof.thumbprint == (try? proof.jwk.thumbprint()), "the thumbprint is the jwk's")
            require(!proof.jti.isEmpty && proof.jti.utf8.count <= dpopVerifier.maximumJTILength, "jti is bounded")
            require(abs(proof.issuedAt.timeIntervalSince(dpopNow)) <= 60, "iat is in the window")
        }
    case 1:
        guard
            let signed = try? dpopClientSigner.sign(
                payload: rest, extraHeader: DPoP.proofHeader(publicJWK: dpopClientJWK))
        else { return }
        if let proof = try? dpopVerifier.verify(signed, method: "GET", url: url, accessToken: nil) {
            require(proof.claims["htm"]?.stringValue == "GET", "htm is the method")
            let htu = proof.claims["htu"]?.stringValue.flatMap { try? DPoP.normalizedProofTarget($0) }
            require(htu == url, "htu normalizes to the request's URI")
            require(proof.thumbprint == (try? dpopClientJWK.thumbprint()), "the key is the signer's")
        }
        // With an access token, a proof without the right ath never passes.
        if (try? dpopVerifier.verify(signed, method: "GET", url: url, accessToken: "token")) != nil {
            require(
                (try? JSONValue(parsing: rest))?["ath"]?.stringValue == DPoP.accessTokenHash("token"), "ath is checked")
        }
    case 2:
        guard let once = try? DPoP.targetURI(text(rest)) else { return }
        require((try? DPoP.targetURI(once)) == once, "targetURI is idempotent")
        require((try? DPoP.normalizedProofTarget(once)) == once, "a target URI is a valid htu")
        require(
            once.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F } && !once.contains("?") && !once.contains("#"),
            "printable ASCII, no query or fragment")
    default:
        let value = ResourceServerChallenge(scheme: "DPoP", parameters: [("error_description", text(rest))]).headerValue
        require(!value.utf8.contains(0x0D) && !value.utf8.contains(0x0A), "no CR or LF")
        require(value.utf8.filter { $0 == 0x22 }.count == 2, "exactly the two quotes around the value")
    }
}

/// An RFC 7662 answer: byte 0 picks the status, the rest is the body. Properties: only a 200 with a
/// JSON object whose `active` is the boolean true is active; an inactive answer carries no claims;
/// an active one's registered claims have their types.
func introspection(_ bytes: [UInt8]) {
    guard let first = bytes.first else { return }
    let status = [200, 200, 200, 400, 401, 500][Int(first) % 6]
    let body = Array(bytes.dropFirst())
    guard let answer = try? IntrospectionAnswer.parse(status: status, body: body) else { return }
    require(status == 200, "only a 200 answers")
    let active = (try? JSONValue(parsing: body))?["active"]?.boolValue
    require(active == answer.active, "active is the answer's boolean")
    if !answer.active { require(answer.claims.fields.count == 0, "an inactive answer carries no claims") }
    if answer.active {
        require(answer.claims["iss"].map { $0.stringValue != nil } ?? true, "iss is a string")
        require(
            answer.claims["exp"].map { $0.doubleValue.map(NumericDate.isInRange) == true } ?? true,
            "exp is a bounded NumericDate")
    }
}

// MARK: - MooseHTTP's plain-URL split

/// `APIRequest(url:)` splits a plain URL itself (`PlainURL`), without `URLComponents`: whatever the
/// text, a URL it calls plain splits into exactly the scheme, authority and path swift-http-types'
/// `HTTPRequest(url:)` takes, rebuilds to the same URL, and the request's `url` is that URL.
func plainURL(_ bytes: [UInt8]) {
    guard let url = URL(string: text(bytes)), let split = PlainURL(url) else { return }
    require(split.scheme == "http" || split.scheme == "https", "only http and https URLs are plain")
    require(split.path.hasPrefix("/") && !split.authority.isEmpty, "a plain URL has an authority and a path")
    require(
        split.authority.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
            && split.path.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F },
        "a plain URL's parts are printable ASCII")
    let head = HTTPRequest(method: .get, url: url)
    require(split.scheme == head.scheme, "the scheme is HTTPRequest's: \(url.absoluteString)")
    require(split.authority == head.authority, "the authority is HTTPRequest's: \(url.absoluteString)")
    require(split.path == head.path, "the path is HTTPRequest's: \(url.absoluteString)")
    require(split.url.absoluteString == head.url?.absoluteString, "the URL rebuilds: \(url.absoluteString)")
    let request = APIRequest(url: url)
    require(request.head.path == head.path && request.head.authority == head.authority, "the request's head")
    require(request.url?.absoluteString == head.url?.absoluteString, "the request's URL: \(url.absoluteString)")
}

// MARK: - Credential helpers (MooseOAuthSystem)

func gitCredential(_ bytes: [UInt8]) {
    guard let request = try? GitCredentialRequest(parsing: bytes) else { return }
    require(request.attributes.count <= GitCredentialRequest.maximumAttributes, "at most maximumAttributes")
    for attribute in request.attributes {
        require(!attribute.key.utf8.contains(UInt8(ascii: "=")), "a key has no =")
        require(
            !attribute.key.utf8.contains(0x0A) && !attribute.value.utf8.contains(0x0A), "no attribute spans lines")
    }
    // What a helper writes back, git reads back as the same attributes (CR aside: git drops a trailing one).
    let answer = GitCredentialAnswer(attributes: request.attributes)
    if let text = try? answer.serialized() {
        let again = try? GitCredentialRequest(parsing: Array(text.utf8))
        require(again?.attributes == request.attributes, "parse(serialize(a)) == a")
    }
    if let host = request.host {
        require(request.attributes.contains { $0.key == "host" && $0.value == host }, "host is sent")
    }
    _ = try? GitCredentialAnswer.accessToken(text(bytes), expiresAt: nil, username: "u", for: request).serialized()
}

func dockerCredential(_ bytes: [UInt8]) {
    if let serverURL = try? DockerCredentialHelper.serverURL(parsing: bytes) {
        let spaces: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
        require(
            serverURL.utf8.first.map(spaces.contains) != true && serverURL.utf8.last.map(spaces.contains) != true,
            "the server URL has no ASCII space around it")
        _ = DockerCredentialHelper.host(ofServerURL: serverURL)
    }
    guard let credentials = try? DockerCredentials(parsing: bytes) else { return }
    require(!credentials.serverURL.isEmpty && !credentials.username.isEmpty, "ServerURL and Username are set")
    let again = try? DockerCredentials(parsing: Array(credentials.serialized().utf8))
    require(again == credentials, "parse(serialize(c)) == c")
}

func execInfo(_ bytes: [UInt8]) {
    guard let info = try? KubernetesExecCredential.ExecInfo(parsing: text(bytes)) else { return }
    let document = KubernetesExecCredential(token: "t", expiresAt: nil, answering: info).serialized()
    let parsed = try? JSONValue(parsing: Array(document.utf8))
    require(parsed?["apiVersion"]?.stringValue == (info.apiVersion ?? .v1).rawValue, "the asked version answers")
}
