import Foundation
import MooseTestSupport
import Testing

/// What a person sees: headless Chromium (tools/browser) as `$BROWSER`, signing in on the
/// provider's own login and consent pages, and the pages Moose serves, read as rendered text.
@Suite(.serialized)
struct BrowserLoginTests {
    static let chromium = LocalServer.repositoryRoot + "/tools/browser/chromium.sh"

    /// The JSON line the browser wrote (`url`, `title`, `text`, `status`), waited for: moose does not
    /// wait for its browser to finish.
    static func browserResult(_ file: URL, timeout: TimeInterval = 20) throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let text = try? String(contentsOf: file, encoding: .utf8), let line = text.split(separator: "\n").last,
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            {
                return object
            }
            Thread.sleep(forTimeInterval: 0.2)
        }
        throw CocoaError(.fileReadNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "the browser wrote no result"])
    }

    static func isPNG(_ file: URL) -> Bool {
        (try? Data(contentsOf: file).prefix(8)) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
    }

    @Test func aRealBrowserSignsInThroughTheProvidersPagesAndSeesMoosesPage() async throws {
        var (home, environment) = CLI.home("moose-chromium")
        defer { try? FileManager.default.removeItem(at: home) }
        let result = home.appendingPathComponent("browser.jsonl")
        let screenshots = home.appendingPathComponent("screenshots")
        environment["BROWSER"] = Self.chromium
        environment["MOOSE_BROWSER_RESULT"] = result.path
        environment["MOOSE_SCREENSHOT_DIR"] = screenshots.path
        environment["MOOSE_SCREENSHOT_STEPS"] = "1"
        // moose-browser is registered with the provider's consent page on.
        let login = try await CLI.run(
            [
                "login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-browser",
                "--scope", "openid", "--scope", "profile", "--scope", "email"
            ], environment: environment, timeout: 120)
        #expect(login.status == 0, "\(login.stderr)")
        // The name a person knows (the ID token has only sub here; UserInfo has the rest).
        #expect(login.stdout.contains(" as alice "), "\(login.stdout)")

        let page = try Self.browserResult(result)
        #expect(page["title"] as? String == "Moose — signed in")
        let text = page["text"] as? String ?? ""
        #expect(text.contains("Signed in") && text.contains("You may close this tab"), "\(text)")
        #expect(Self.isPNG(screenshots.appendingPathComponent("callback.png")))
        // The provider's own pages were on the way: its login form and its consent page.
        let steps = (try? FileManager.default.contentsOfDirectory(atPath: screenshots.path)) ?? []
        #expect(steps.contains { $0.contains("login") } && steps.contains { $0.contains("authorize") }, "\(steps)")

        let status = try await CLI.run(["status", "--json"], environment: environment)
        let entry = try #require(
            (try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])?.first)
        #expect(entry["preferred_username"] as? String == "alice" && entry["display_name"] as? String == "alice")
        #expect(entry["email"] as? String == "alice@example.com" && entry["name"] as? String == "Alice Liddell")
        #expect(entry["subject"] as? String == "1")
    }

    @Test func theDeviceFlowInARealBrowser() async throws {
        let (home, environment) = CLI.home("moose-chromium-device")
        defer { try? FileManager.default.removeItem(at: home) }
        let process = TestProcess()
        process.executableURL = URL(fileURLWithPath: CLI.binary)
        process.arguments = [
            "login", "--device", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-device",
            "--device-endpoint", TestIdentityProvider.issuer + "/device-authorization/"
        ]
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let errors = Pipe(), output = Pipe()
        process.standardError = errors
        process.standardOutput = output
        try process.run()
        // Piped: the banner's plain form, "…enter the code:" then the code on its own line (read off
        // the cooperative pool: each read blocks a thread).
        let (text, code, uri) = try await offThePool { () -> (String, String?, String?) in
            var text = ""
            var code: String? = nil
            var uri: String? = nil
            let deadline = Date().addingTimeInterval(30)
            while code == nil, Date() < deadline {
                let chunk = errors.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                text += String(decoding: chunk, as: UTF8.self)
                let lines = text.split(separator: "\n").map(String.init)
                if let index = lines.firstIndex(where: { $0.hasPrefix("To sign in, open ") }), index + 1 < lines.count {
                    uri = lines[index].split(separator: " ").dropFirst(4).first.map(String.init)
                    code = lines[index + 1].trimmingCharacters(in: .whitespaces)
                }
            }
            return (text, code, uri)
        }
        let userCode = try #require(code, "no user code in: \(text)")
        let verification = try #require(uri)
        let browser = try await CLI.run(
            ["bash", Self.chromium, "--device", verification, userCode], environment: environment, timeout: 90,
            executable: "/bin/bash")
        #expect(browser.status == 0, "\(browser.stderr)")
        let page = try #require(try JSONSerialization.jsonObject(with: Data(browser.stdout.utf8)) as? [String: Any])
        #expect((page["text"] as? String ?? "").localizedCaseInsensitiveContains("authorized"), "\(page)")
        let stdout = try await offThePool { () -> String in
            process.waitUntilExit()
            return String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        }
        #expect(process.terminationStatus == 0, "\(text)")
        #expect(stdout.contains("Logged in"), "\(stdout)")
    }
}

/// Issue "The first hour" §4: the loopback page reports the outcome of the code exchange — not
/// "Signed in" when the provider then refuses it.
@Suite(.serialized)
struct BrowserOutcomePageTests {
    @Test func aRefusedCodeExchangeIsWhatTheBrowserPageSays() async throws {
        var (home, environment) = CLI.home("moose-chromium-refused")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let result = home.appendingPathComponent("browser.jsonl")
        let secret = home.appendingPathComponent("wrong-secret")
        try Data("not-the-secret\n".utf8).write(to: secret)
        environment["BROWSER"] = BrowserLoginTests.chromium
        environment["MOOSE_BROWSER_RESULT"] = result.path
        // The confidential client with a wrong secret: the user signs in, the token endpoint says invalid_client.
        let login = try await CLI.run(
            [
                "login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-confidential",
                "--client-secret-file", secret.path, "--scope", "openid"
            ], environment: environment, timeout: 120)
        #expect(login.status == 1 && login.stderr.contains("invalid_client"), "\(login.stderr)")
        let page = try BrowserLoginTests.browserResult(result)
        let text = page["text"] as? String ?? ""
        #expect(page["title"] as? String == "Moose — sign-in failed", "\(page)")
        #expect(text.contains("did not complete") && text.contains("invalid_client"), "\(text)")
        #expect(!text.contains("Signed in"), "\(text)")
    }
}
