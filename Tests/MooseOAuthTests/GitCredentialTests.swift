import Foundation
import MooseOAuthSystem
import MooseTestSupport
import Testing

/// The code of the `CredentialHelperError` `body` throws; `nil` when it throws nothing (or another error).
func helperErrorCode<T>(_ body: () throws -> T) -> CredentialHelperError.Code? {
    do {
        _ = try body()
        return nil
    } catch let error as CredentialHelperError {
        return error.code
    } catch {
        return nil
    }
}

/// git's credential helper protocol (git-credential(1)): what `GitCredentialRequest` reads and
/// `GitCredentialAnswer` writes, by hand and through the real git binary.
@Suite struct GitCredentialTests {
    static func request(_ text: String) throws -> GitCredentialRequest {
        try GitCredentialRequest(parsing: Array(text.utf8))
    }

    @Test func linesAreReadAsGitReadsThem() throws {
        let request = try Self.request(
            "protocol=https\r\nhost=git.example.com:8443\npath=a=b\ncapability[]=authtype\nhost=last.example\n\nhost=after\n"
        )
        #expect(request.host == "last.example", "the last value wins, and nothing after the blank line counts")
        #expect(request.value("path") == "a=b", "only the first = splits")
        #expect(request.value("protocol") == "https", "a trailing CR is dropped")
        #expect(request.capabilities == ["authtype"] && request.acceptsAuthType)
        #expect(request.attributes.count == 5)
        // A list attribute: an empty value clears what came before it.
        let cleared = try Self.request("wwwauth[]=Basic\nwwwauth[]=\nwwwauth[]=Bearer realm=x\n")
        #expect(cleared.values("wwwauth[]") == ["Bearer realm=x"])
        #expect(try Self.request("").attributes.isEmpty && (try Self.request("")).host == nil)
        let erase = try Self.request("username=u\ncredential=tok\n")
        #expect(erase.presentedSecret == "tok" && !erase.acceptsAuthType)
    }

    @Test func malformedOrOversizedInputIsRefused() {
        for text in ["no-equals\n", "host=a\u{0}b\n"] {
            #expect(helperErrorCode { try Self.request(text) } == CredentialHelperError.malformedInput)
        }
        let many = String(repeating: "k=v\n", count: GitCredentialRequest.maximumAttributes + 1)
        #expect(helperErrorCode { try Self.request(many) } == CredentialHelperError.inputTooLarge)
        let big = "k=" + String(repeating: "v", count: GitCredentialRequest.maximumSize)
        #expect(helperErrorCode { try Self.request(big) } == CredentialHelperError.inputTooLarge)
    }

    @Test func theAnswerFollowsWhatGitAnnounced() throws {
        let expiry = Date(timeIntervalSince1970: 1_800_000_000)
        let old = try GitCredentialAnswer.accessToken(
            "tok.en-1", expiresAt: expiry, username: "x-access-token", for: Self.request("host=h\n"))
        #expect(try old.serialized() == "username=x-access-token\npassword=tok.en-1\npassword_expiry_utc=1800000000\n")
        let new = try GitCredentialAnswer.accessToken(
            "tok", expiresAt: nil, username: "ignored", for: Self.request("capability[]=authtype\n"))
        #expect(try new.serialized() == "capability[]=authtype\nauthtype=Bearer\ncredential=tok\n")
        // A token no header can carry is not handed over; nor a line break git would split on.
        #expect(
            helperErrorCode {
                try GitCredentialAnswer.accessToken("a b", expiresAt: nil, username: "u", for: Self.request(""))
            } == CredentialHelperError.unrepresentableValue)
        let broken = try GitCredentialAnswer.accessToken(
            "tok", expiresAt: nil, username: "u\nhost=evil", for: .init(attributes: []))
        #expect(helperErrorCode { try broken.serialized() } == CredentialHelperError.unrepresentableValue)
        #expect(
            helperErrorCode {
                try GitCredentialAnswer(attributes: [.init("a=b", "c")]).serialized()
            } == CredentialHelperError.unrepresentableValue)
    }

    /// The real git: what it sends a helper is read, and what the helper answers is what git fills in.
    @Test func theRealGitReadsTheAnswerAndIsRead() async throws {
        let git = "/usr/bin/git"
        // The real part or a failure, never a silent pass: tools/test installs git.
        guard FileManager.default.isExecutableFile(atPath: git) else {
            Issue.record("git is not installed at \(git) (tools/test installs it): the helper was not tried with git")
            return
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("moose-git-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let seen = directory.appendingPathComponent("seen")
        let answerFile = directory.appendingPathComponent("answer")
        let answer = try GitCredentialAnswer.accessToken(
            "mF_9.B5f-4.1JqM", expiresAt: Date(timeIntervalSinceNow: 3600), username: "oauth2",
            for: GitCredentialRequest(attributes: []))
        try Data(try answer.serialized().utf8).write(to: answerFile)
        // A helper that keeps what git sent and answers with the file.
        let helper = "!f() { cat > '\(seen.path)'; cat '\(answerFile.path)'; }; f"
        let process = TestProcess()
        process.executableURL = URL(fileURLWithPath: git)
        process.arguments = ["-c", "credential.helper=", "-c", "credential.helper=\(helper)", "credential", "fill"]
        var environment = ProcessInfo.processInfo.environment
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment["GIT_TERMINAL_PROMPT"] = "0"
        environment["HOME"] = directory.path
        process.environment = environment
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        _ = signal(SIGPIPE, SIG_IGN) // a git that exits early fails the write, not the test process
        try process.run()
        input.fileHandleForWriting.write(Data("url=https://git.example.com:8443/org/repo.git\n\n".utf8))
        try input.fileHandleForWriting.close()
        let filled = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(filled.contains("username=oauth2\n") && filled.contains("password=mF_9.B5f-4.1JqM\n"), "\(filled)")

        let request = try GitCredentialRequest(parsing: Array(try Data(contentsOf: seen)))
        #expect(request.host == "git.example.com:8443" && request.value("protocol") == "https", "\(request.attributes)")
        #expect(request.presentedSecret == nil)
    }
}
