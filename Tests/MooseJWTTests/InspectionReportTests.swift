import Foundation
import MooseCrypto
import MooseJWT
import MooseTestSupport
import Testing

/// `InspectionReport`: the text and JSON `moose inspect` prints, made from joserfc's tokens and keys
/// (Fixtures/joserfc) and tokens signed here with real keys.
struct InspectionReportTests {
    let fixtures: JoserfcTokens
    let keys: [JWTKey]
    let now: Date

    init() throws {
        fixtures = try JoserfcTokens.load()
        keys = try JWKS(json: Fixtures.string("joserfc/jwks.json")).keys.map { try $0.verificationKey() }
        now = Date(timeIntervalSince1970: fixtures.test_now)
    }

    func validation(audiences: Set<String>? = ["moose-cli"], anyAudience: Bool = false) -> ClaimValidation {
        ClaimValidation(audiences: audiences, acceptsAnyAudience: anyAudience, clock: fixtures.clock)
    }

    func report(
        _ name: String, verified: Bool = true, validation: ClaimValidation? = nil,
        mode: InspectionReport.Mode = .verification, hints: InspectionReport.Hints = .init()
    ) throws -> InspectionReport {
        let validation = validation ?? self.validation()
        let verifier =
            verified
            ? JWTVerifier(keys: keys, allowedAlgorithms: JWTAlgorithm.asymmetric, validation: validation) : nil
        let inspection = try TokenInspection(try fixtures.token(name), verifier: verifier, validation: validation)
        return InspectionReport(inspection, now: now, mode: mode, hints: hints)
    }

    @Test func aValidTokenReadsAsValidInTextAndJSON() throws {
        let report = try report("es256")
        #expect(report.verdict == .valid && report.failures.isEmpty)
        let text = report.text()
        #expect(text.hasPrefix("Header\n  {\n"), "\(text)")
        #expect(text.contains("\"alg\": \"ES256\"") && text.contains("\"sub\": \"248289761001\""), "\(text)")
        #expect(text.contains("Times (now 2027-01-15T08:00:00Z)"), "\(text)")
        #expect(text.contains("Signature\n  ES256, 64 bytes, verified with key \""), "\(text)")
        #expect(text.hasSuffix("✔ valid: signature verified, every check passed"), "\(text)")
        #expect(!text.contains("\u{1B}"), "no color unless asked")
        #expect(report.text(color: true).contains("\u{1B}[32m✔ valid\u{1B}[0m"))

        let json = report.json
        #expect(json["verdict"]?.stringValue == "valid")
        #expect(json["signature"]?["status"]?.stringValue == "verified")
        #expect(json["claims"]?["sub"]?.stringValue == "248289761001")
        #expect(json["now"]?.stringValue == "2027-01-15T08:00:00Z")
        #expect(json["reasons"]?.arrayValue?.isEmpty == true)
        #expect(json["times"]?["exp"]?["relative"]?.stringValue?.hasPrefix("valid for ") == true)
        // The JSON is JSON: it parses back to the same value.
        #expect(try JSONValue(parsing: Array(json.prettyPrinted().utf8)) == json)
    }

    @Test func relativeTimesSayPastAndFuture() {
        let at = Date(timeIntervalSince1970: 1_000_000)
        #expect(InspectionReport.relativeTime(of: "exp", at.addingTimeInterval(252), now: at) == "valid for 4m 12s")
        #expect(InspectionReport.relativeTime(of: "exp", at.addingTimeInterval(-180), now: at) == "expired 3m ago")
        #expect(
            InspectionReport.relativeTime(of: "nbf", at.addingTimeInterval(60), now: at) == "not valid for another 1m")
        #expect(InspectionReport.relativeTime(of: "nbf", at.addingTimeInterval(-60), now: at) == "valid since 1m ago")
        #expect(InspectionReport.relativeTime(of: "iat", at.addingTimeInterval(-7200), now: at) == "2h ago")
        #expect(InspectionReport.relativeTime(of: "iat", at.addingTimeInterval(5), now: at) == "in 5s (in the future)")
        // Total: a NumericDate far out is a text, not a trap.
        #expect(
            InspectionReport.relativeTime(of: "exp", Date(timeIntervalSince1970: 1e300), now: at).contains("million"))
    }

    /// Decoding alone shows an expired token as such without failing; a verification fails it.
    @Test func decodeOnlyShowsTimeProblemsWithoutFailing() throws {
        let decoded = try report("expired", verified: false, mode: .decodeOnly)
        #expect(decoded.inspection.verdict == .invalid)
        #expect(decoded.verdict == .decoded && decoded.failures.isEmpty)
        let text = decoded.text()
        #expect(text.contains("● decoded: token expired") && text.hasSuffix("(not verified: decoded only)"), "\(text)")
        #expect(!text.contains("✘"))
        #expect(decoded.json["verdict"]?.stringValue == "decoded")
        #expect(decoded.json["reasons"]?.arrayValue?.first?["code"]?.stringValue == "expired")

        let judged = try report("expired", verified: false)
        #expect(judged.verdict == .invalid)
        #expect(judged.text().contains("✘ invalid: token expired"), "\(judged.text())")

        // What no one may accept fails in decode-only mode too.
        let none = try report("alg_none", verified: false, mode: .decodeOnly)
        #expect(none.verdict == .invalid && none.failures.first?.code == JWTError.algorithmNone)
        #expect(none.text().contains("✘ invalid: alg \"none\""), "\(none.text())")
    }

    @Test func withoutAKeyTheTextSaysWhatWouldVerify() throws {
        let plain = try report("es256", verified: false)
        #expect(plain.verdict == .decoded)
        #expect(plain.text().hasSuffix("claims checked, signature NOT verified (give a verification key)"))
        #expect(plain.json["signature"]?["status"]?.stringValue == "not-checked")
        let hinted = try report(
            "es256", verified: false, hints: InspectionReport.Hints(verifySignature: "pass a key file"))
        #expect(hinted.text().hasSuffix("signature NOT verified (pass a key file)"))
    }

    /// A token naming an audience, verified without one: "not accepted" in the caller's words,
    /// with the audiences the token names.
    @Test func anUncheckedAudienceIsNotAcceptedInTheCallersWords() throws {
        let library = try report("es256", validation: validation(audiences: nil))
        #expect(library.verdict == .invalid && library.isOnlyNotAccepted)
        let expected =
            "audience not checked: give the audience to check (ClaimValidation.audiences), or accept any audience "
            + "explicitly (the token is for \"https://api.example.com\", \"moose-cli\")"
        #expect(library.text().hasSuffix("✘ not accepted: " + expected), "\(library.text())")
        #expect(library.json["reasons"]?.arrayValue?.first?["message"]?.stringValue == expected)
        #expect(library.json["reasons"]?.arrayValue?.first?["code"]?.stringValue == "audienceNotChecked")

        let cli = try report(
            "es256", validation: validation(audiences: nil),
            hints: InspectionReport.Hints(checkAudience: "name it", verifySignature: "-"))
        #expect(cli.text().contains("✘ not accepted: audience not checked: name it (the token is for"))

        // Another failure with it: "invalid", and the rest on "also:" lines.
        let both = try report("expired", validation: validation(audiences: nil))
        #expect(!both.isOnlyNotAccepted)
        let text = both.text()
        #expect(text.contains("✘ invalid: token expired") && text.contains("\n  also: audience not checked"), "\(text)")
    }

    @Test func aFailedSignatureIsSaidOnTheSignatureLine() throws {
        let report = try report("tampered_signature")
        #expect(report.verdict == .invalid)
        #expect(report.json["signature"]?["status"]?.stringValue == "failed")
        #expect(report.text().contains("bytes, FAILED: "), "\(report.text())")
        #expect(report.json["reasons"]?.arrayValue?.first?["code"]?.stringValue == "invalidSignature")
    }

    @Test func aTextPayloadIsShownAndIsNoClaimsSet() throws {
        let key = JWTKey(secret: Array(repeating: UInt8(7), count: 32))
        let token = try JWTSigner(key: key, algorithm: .hs256).sign(payload: Array("hello\u{1B}[2J".utf8))
        let validation = ClaimValidation(acceptsAnyAudience: true, clock: fixtures.clock)
        let verifier = JWTVerifier(keys: [key], allowedAlgorithms: [.hs256], validation: validation)
        let report = InspectionReport(
            try TokenInspection(token, verifier: verifier, validation: validation), now: now)
        #expect(report.verdict == .invalid && report.failures.map(\.code) == [JWTError.claimsNotObject])
        let text = report.text()
        #expect(text.contains("Payload (not a JSON object)\n  hello\\u{1b}[2J"), "\(text)")
        #expect(report.json["payload"]?.stringValue == "hello\u{1B}[2J")
        #expect(report.json["claims"] == .null)
    }

    /// Whatever a token carries, the text holds no control character but newlines, and no
    /// bidirectional control: its escapes are visible.
    @Test func tokenSuppliedTextCannotDriveTheTerminal() throws {
        let key = try JWTKey(pem: Fixtures.string("joserfc/ec256-private.pem"))
        let hostile = "\u{1B}]0;owned\u{07}\u{9B}31m\u{202E}gpj.exe\u{2028}\r"
        let token = try JWTSigner(key: key, algorithm: .es256).sign(
            ["sub": .string(hostile), "aud": .string(hostile), "exp": 1_800_000_300],
            extraHeader: ["kid": .string(hostile)])
        let publicKey = try JWTKey(pem: Fixtures.string("joserfc/ec256-public.pem"), keyID: hostile)
        for audiences: Set<String>? in [nil, ["other"]] {
            let validation = ClaimValidation(audiences: audiences, clock: fixtures.clock)
            let verifier = JWTVerifier(keys: [publicKey], allowedAlgorithms: [.es256], validation: validation)
            let report = InspectionReport(
                try TokenInspection(token, verifier: verifier, validation: validation), now: now)
            for (text, colored) in [(report.text(), false), (report.text(color: true), true)] {
                for scalar in text.unicodeScalars {
                    let value = scalar.value
                    let allowed = value == 0x0A || value == 0x09 || (colored && value == 0x1B)
                    let control =
                        value < 0x20 || (0x7F...0x9F).contains(value) || (0x2028...0x2029).contains(value)
                        || (0x202A...0x202E).contains(value)
                    #expect(allowed || !control, "U+\(String(value, radix: 16)) reached the text")
                }
            }
            // Ours only: every ESC of the colored text starts an SGR sequence we wrote.
            let colored = report.text(color: true)
            #expect(!colored.contains("\u{1B}]"), "an OSC sequence from the token")
            #expect(report.text().contains("\\u{1b}"), "the escape is shown, not sent")
            // The JSON escapes the same characters as JSON.
            let json = report.json.prettyPrinted()
            #expect(!json.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x202E || $0.value == 0x9B })
        }
    }

    @Test func unusableTokensAreSaidForWhatTheyAre() throws {
        let opaque = "mat_0123456789abcdef"
        #expect(InspectionReport.looksOpaque(opaque))
        #expect(!InspectionReport.looksOpaque(try fixtures.token("es256")))
        for (token, expected) in [
            (opaque, "not a JWT: this looks like an opaque token"), ("a.b", "token is unusable: "),
            (String(repeating: "a", count: 70_000), "token is unusable: ")
        ] {
            do throws(JWTError) {
                _ = try TokenInspection(token, verifier: nil, validation: validation())
                Issue.record("\(token.prefix(20)) was usable")
            } catch {
                #expect(InspectionReport.unusableText(error, token: token).hasPrefix(expected), "\(error)")
                let json = InspectionReport.unusableJSON(error)
                #expect(json["verdict"]?.stringValue == "unusable")
                #expect(json["reasons"]?.arrayValue?.first?["code"]?.stringValue == error.code.description)
            }
        }
    }

    /// The default allow-list: what each key's type fits, never HMAC for a public key.
    @Test func verifiableAlgorithmsFollowTheKeyType() throws {
        let rsa = try JWTKey(pem: Fixtures.string("joserfc/rsa-public.pem"))
        #expect(rsa.verifiableAlgorithms == [.rs256, .rs384, .rs512, .ps256, .ps384, .ps512])
        let ec = try JWTKey(pem: Fixtures.string("joserfc/ec256-public.pem"))
        #expect(ec.verifiableAlgorithms == [.es256])
        let ed = try JWTKey(pem: Fixtures.string("joserfc/ed25519-public.pem"))
        #expect(ed.verifiableAlgorithms == [.eddsa, .ed25519])
        #expect(JWTKey(secret: Array(repeating: UInt8(1), count: 32)).verifiableAlgorithms == [.hs256, .hs384, .hs512])
        let pinned = try JWTKey(pem: Fixtures.string("joserfc/rsa-public.pem"), algorithm: .ps384)
        #expect(pinned.verifiableAlgorithms == [.ps384])
        // Pinned to an algorithm its type does not fit: none.
        let misfit = try JWTKey(pem: Fixtures.string("joserfc/ec256-public.pem"), algorithm: .es384)
        #expect(misfit.verifiableAlgorithms.isEmpty)
        let edPinned = try JWTKey(pem: Fixtures.string("joserfc/ed25519-public.pem"), algorithm: .ed25519)
        #expect(edPinned.verifiableAlgorithms == [.eddsa, .ed25519])
        for key in keys {
            #expect(!key.verifiableAlgorithms.isEmpty && key.verifiableAlgorithms.allSatisfy { $0.keyFamily != .hmac })
        }
    }
}
