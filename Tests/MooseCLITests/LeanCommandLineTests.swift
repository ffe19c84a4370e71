import ArgumentParser
@testable import MooseCLI
import Testing

/// `LeanCommandLine` (the argument-parser-free start of `moose inspect` and `moose token`) against
/// argument-parser itself: whatever the lean reader accepts, argument-parser must parse to the very
/// same values; everything outside the plain subset must be left to argument-parser.
struct LeanCommandLineTests {
    /// What the lean reader made, or `nil`; a mismatch with argument-parser is recorded.
    @discardableResult
    static func compare(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) -> LeanCommandLine
        .Command?
    {
        guard let lean = LeanCommandLine.command(arguments) else { return nil }
        let parsed: any ParsableCommand
        do {
            parsed = try MooseCommand.parseAsRoot(arguments)
        } catch {
            Issue.record(
                "lean accepted \(arguments), argument-parser refused it: \(error)", sourceLocation: sourceLocation)
            return lean
        }
        switch lean {
        case .inspect(let values):
            guard let command = parsed as? InspectCommand else {
                Issue.record("\(arguments): argument-parser made \(type(of: parsed))", sourceLocation: sourceLocation)
                return lean
            }
            #expect(command.values == values, "\(arguments)", sourceLocation: sourceLocation)
        case .token(let values):
            guard let command = parsed as? TokenCommand else {
                Issue.record("\(arguments): argument-parser made \(type(of: parsed))", sourceLocation: sourceLocation)
                return lean
            }
            let expected = command.values
            #expect(expected.store.storePath == values.store.storePath, "\(arguments)", sourceLocation: sourceLocation)
            #expect(expected.store.keyFile == values.store.keyFile, "\(arguments)", sourceLocation: sourceLocation)
            #expect(
                expected.store.keyEnvironment == values.store.keyEnvironment, "\(arguments)",
                sourceLocation: sourceLocation)
            #expect(
                expected.store.passphraseFile == values.store.passphraseFile, "\(arguments)",
                sourceLocation: sourceLocation)
            #expect(
                expected.store.keySecretService == values.store.keySecretService, "\(arguments)",
                sourceLocation: sourceLocation)
            #expect(expected.resource == values.resource, "\(arguments)", sourceLocation: sourceLocation)
            #expect(expected.profile == values.profile, "\(arguments)", sourceLocation: sourceLocation)
            #expect(expected.minValidity == values.minValidity, "\(arguments)", sourceLocation: sourceLocation)
            #expect(expected.idToken == values.idToken, "\(arguments)", sourceLocation: sourceLocation)
            #expect(expected.format == values.format, "\(arguments)", sourceLocation: sourceLocation)
            #expect(expected.url == values.url, "\(arguments)", sourceLocation: sourceLocation)
            #expect(expected.method == values.method, "\(arguments)", sourceLocation: sourceLocation)
            #expect(expected.nonce == values.nonce, "\(arguments)", sourceLocation: sourceLocation)
        }
        return lean
    }

    @Test func plainCommandLinesAreReadAsArgumentParserReadsThem() {
        let accepted: [[String]] = [
            ["inspect"], ["inspect", "-"], ["inspect", ""], ["inspect", "eyJ.x.y"], ["inspect", "token.jwt", "--json"],
            ["inspect", "--json", "t"], ["inspect", "t", "--aud", "a", "--aud=b", "--alg", "RS256", "--alg=ES256"],
            ["inspect", "t", "--any-audience", "--leeway", "30", "--now", "1300819000", "--iss", "https://i"],
            ["inspect", "t", "--leeway=2.5", "--now=2026-01-01T12:00:00Z", "--key", "k.pem", "--secret-file", "s"],
            ["inspect", "--jwks", "jwks.json", "--issuer=https://id.example.com", "t"],
            ["inspect", "t", "--iss", "-"], ["inspect", "t", "--aud", ""], ["inspect", "t", "--aud==x"],
            ["inspect", "t", "--iss=a=b"], ["inspect", "K\u{301}", "--aud", "\u{212A}"],
            ["token"], ["token", "--format", "exec-credential"], ["token", "--format=json"], ["token", "--id-token"],
            ["token", "--store", "/s.sqlite", "--key-file", "/k", "--profile", "work", "--min-validity", "60s"],
            ["token", "--key-env", "VAR"], ["token", "--passphrase-file=/p"], ["token", "--store", ""],
            ["token", "--format", "header", "--url", "https://api/x", "--method", "POST", "--nonce", "n"],
            ["token", "--min-validity", "x"] // accepted here; run() refuses it exactly as before
        ]
        for arguments in accepted {
            #expect(Self.compare(arguments) != nil, "\(arguments) should be read without argument-parser")
        }
    }

    @Test func everythingElseIsLeftToArgumentParser() {
        let refused: [[String]] = [
            [], ["--help"], ["inspect", "--help"], ["inspect", "-h"], ["inspect", "help"], ["token", "help"],
            ["token", "--help"], ["token", "-h"], ["inspect", "--", "t"], ["inspect", "t", "u"], ["token", "t"],
            ["inspect", "--no-such-flag"], ["inspect", "--jso"], ["inspect", "--JSON"], ["inspect", "-json"],
            ["inspect", "t", "--json", "--json"], ["inspect", "t", "--json=yes"],
            ["inspect", "t", "--iss", "a", "--iss", "b"],
            ["inspect", "t", "--iss"], ["inspect", "t", "--iss="], ["inspect", "t", "--iss=", "x"],
            ["inspect", "t", "--iss", "-x"],
            ["inspect", "t", "--iss", "--json"], ["inspect", "t", "--leeway", "-1"],
            ["inspect", "t", "--leeway", "soon"],
            ["inspect", "t", "--leeway=nan"], ["inspect", "t", "--alg", "none"], ["inspect", "t", "--alg", "XS999"],
            ["inspect", "t", "--now", "yesterday"], ["inspect", "-x"], ["inspect", "---json"],
            ["inspect", "t", "--iss", "help"],
            ["token", "--format", "yaml"], ["token", "--format"], ["token", "--store", "a", "--store", "b"],
            ["token", "--version"], ["token", "--generate-completion-script", "bash"],
            ["token", "--id-token", "--id-token"],
            ["token", "--min-validity", "-5"], ["status"], ["Token"], ["inspect\u{301}"],
            ["inspect", "--\u{301}json"], ["inspect", "t", "--json\u{301}"], ["inspect", "t", "--iss=\u{301}x"],
            ["inspect"] + Array(repeating: "--aud", count: 40).flatMap { [$0, "a"] }
        ]
        for arguments in refused {
            #expect(LeanCommandLine.command(arguments) == nil, "\(arguments) must go through argument-parser")
        }
    }

    /// Random command lines from the words that matter (every option, values that look like options,
    /// "=", "--", "help", combining marks, the Kelvin sign): whatever the lean reader accepts,
    /// argument-parser reads the same way.
    @Test func randomCommandLinesAgreeWithArgumentParser() {
        let words = [
            "--jwks", "--issuer", "--key", "--secret-file", "--iss", "--aud", "--any-audience", "--alg", "--leeway",
            "--now", "--json", "--store", "--key-file", "--key-env", "--passphrase-file", "--profile",
            "--min-validity", "--id-token", "--format", "--url", "--method", "--nonce",
            "x", "", "-", "--", "-x", "help", "RS256", "HS256", "none", "1", "-1", "2.5", "1e3", "nan",
            "token", "json", "exec-credential", "header", "env", "a=b", "=", "--aud=", "--iss=v", "--leeway=3",
            "--format=env", "--store=/s", "--json=1", "K\u{301}", "\u{212A}", "=\u{301}", "--h", "-h", "--help"
        ]
        var generator = SplitMix64(seed: 0x6d6f6f7365)
        var accepted = 0
        for _ in 0..<4000 {
            let command = generator.next() % 2 == 0 ? "inspect" : "token"
            let count = Int(generator.next() % 7)
            let arguments = [command] + (0..<count).map { _ in words[Int(generator.next() % UInt64(words.count))] }
            if Self.compare(arguments) != nil { accepted += 1 }
        }
        #expect(accepted > 200, "the random command lines should exercise the lean reader (\(accepted) accepted)")
    }
}

/// A small deterministic generator (SplitMix64), so a failure names a reproducible case.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
