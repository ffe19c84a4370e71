import Foundation
import MooseCrypto
import MooseTestSupport
import Testing

/// A resource server of tools/resource, started for one test: it prints `READY <url>` and stops
/// when its stdin closes.
final class ResourceServer {
    let process = TestProcess()
    let input = Pipe()
    let url: String

    init(_ script: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            ["python3", "-u", LocalServer.repositoryRoot + "/tools/resource/" + script] + arguments
            + ["--issuer", TestIdentityProvider.issuer]
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = input
        process.standardError = FileHandle.nullDevice
        try process.run()
        var text = ""
        while !text.contains("\n") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard text.hasPrefix("READY "),
            let url = text.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines)
        else {
            throw CocoaError(
                .fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "\(script) did not start: \(text)"])
        }
        self.url = url
    }

    /// `/_test/stats` as JSON.
    func stats() async throws -> [String: Any] {
        let result = try await CLI.run(["curl", "-sk", url + "/_test/stats"], executable: "/usr/bin/curl")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    /// The fingerprints of the tokens the server accepted, most recent last.
    func acceptedFingerprints() async throws -> [String] {
        let recent = try await stats()["recent"] as? [[String: Any]] ?? []
        return recent.filter { ($0["outcome"] as? String) == "accepted" }.compactMap { $0["fingerprint"] as? String }
    }

    deinit { CLI.end(process, closing: input) }
}

/// `moose` as the credential helper of real clients: kubectl, git; and docker's documented protocol.
@Suite(.serialized)
struct CredentialHelperTests {
    static func sha256(_ text: String) -> String {
        DigestAlgorithm.sha256.hash(Array(text.utf8)).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    static func accessToken(_ environment: [String: String]) async throws -> String {
        let token = try await CLI.run(["token"], environment: environment)
        #expect(token.status == 0, "\(token.stderr)")
        return token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func kubectlRunsMooseAsItsExecPluginAndTenParallelCallsRefreshOnce() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/kubectl") else {
            print(
                "SKIPPED kubectlRunsMooseAsItsExecPlugin: kubectl is not installed here (tools/test installs it where apt can)"
            )
            return
        }
        let (home, environment) = try await CLI.logIn("moose-kubectl")
        defer { try? FileManager.default.removeItem(at: home) }
        let certificates = home.appendingPathComponent("kube-certs")
        let server = try ResourceServer(
            "kube_api.py", ["--port", "0", "--cert-dir", certificates.path, "--cache-seconds", "0"])
        let template = try String(
            contentsOfFile: LocalServer.repositoryRoot + "/tools/resource/kubeconfig.template", encoding: .utf8)
        let kubeconfig = home.appendingPathComponent("kubeconfig")
        try template.replacingOccurrences(of: "{{SERVER_URL}}", with: server.url)
            .replacingOccurrences(of: "{{CA_FILE}}", with: certificates.appendingPathComponent("ca.crt").path)
            .replacingOccurrences(of: "{{MOOSE}}", with: CLI.binary)
            .replacingOccurrences(of: "{{PROFILE}}", with: "default")
            .replacingOccurrences(of: "{{STORE}}", with: home.appendingPathComponent("data/moose/store.sqlite").path)
            .replacingOccurrences(of: "{{KEY_FILE}}", with: home.appendingPathComponent("config/moose/store.key").path)
            .write(to: kubeconfig, atomically: true, encoding: .utf8)
        var kubeEnvironment = environment
        kubeEnvironment["HOME"] = home.path // kubectl's discovery cache stays in the test's home
        func kubectl() async throws -> CLIResult {
            try await CLI.run(
                ["kubectl", "--kubeconfig", kubeconfig.path, "get", "namespaces", "-o", "name"],
                environment: kubeEnvironment, timeout: 60, executable: "/usr/bin/kubectl")
        }
        let first = try await kubectl()
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("namespace/"), "\(first.stdout)")
        // The token the provider issued is the one that arrived.
        await #expect(try server.acceptedFingerprints().last == Self.sha256(try Self.accessToken(environment)))

        // Expired: ten kubectl processes at once, one refresh at the provider.
        let refreshToken = try await TokenCLITests.expireStoredSession(environment: environment)
        let runs = await BackgroundCLI.finishAll(
            try (0..<10).map { _ in
                try BackgroundCLI(
                    ["--kubeconfig", kubeconfig.path, "get", "namespaces", "-o", "name"], environment: kubeEnvironment,
                    executable: "/usr/bin/kubectl")
            })
        #expect(runs.allSatisfy { $0.status == 0 }, "\(runs.map(\.stderr))")
        #expect(
            try await TokenCLITests.familySize(of: refreshToken) == 2, "ten kubectl calls caused more than one refresh")
        await #expect(try server.acceptedFingerprints().last == Self.sha256(try Self.accessToken(environment)))
    }

    /// The README's one-line kubectl set-up, run as written (moose's path aside), is enough for
    /// `kubectl get`: kubectl 1.30+ refuses an exec plugin without its interactive mode.
    @Test func theReadmesKubectlLineWorksAsWritten() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/kubectl") else {
            print("SKIPPED theReadmesKubectlLineWorksAsWritten: kubectl is not installed here")
            return
        }
        let readme = try String(contentsOfFile: LocalServer.repositoryRoot + "/README.md", encoding: .utf8)
        let start = try #require(readme.range(of: "kubectl config set-credentials me"))
        var command = ""
        for line in readme[start.lowerBound...].split(separator: "\n") {
            let code = line.split(separator: "#", maxSplits: 1).first.map(String.init) ?? ""
            command += code.trimmingCharacters(in: .whitespaces)
            guard command.hasSuffix("\\") else { break }
            command = String(command.dropLast()) + " "
        }
        command = command.replacingOccurrences(of: "--exec-command=moose", with: "--exec-command=" + CLI.binary)
        let (home, environment) = try await CLI.logIn("moose-kubectl-readme")
        defer { try? FileManager.default.removeItem(at: home) }
        let certificates = home.appendingPathComponent("kube-certs")
        let server = try ResourceServer(
            "kube_api.py", ["--port", "0", "--cert-dir", certificates.path, "--cache-seconds", "0"])
        var kube = environment
        kube["HOME"] = home.path
        kube["KUBECONFIG"] = home.appendingPathComponent("kubeconfig").path
        let setUp = [
            command,
            "kubectl config set-cluster lab --server=\(server.url) --certificate-authority="
                + certificates.appendingPathComponent("ca.crt").path,
            "kubectl config set-context lab --cluster=lab --user=me", "kubectl config use-context lab"
        ]
        for line in setUp {
            let result = try await CLI.run(["sh", "-c", line], environment: kube, timeout: 60, executable: "/bin/sh")
            #expect(result.status == 0, "\(line): \(result.stderr)")
        }
        let get = try await CLI.run(
            ["kubectl", "get", "namespaces", "-o", "name"], environment: kube, timeout: 60,
            executable: "/usr/bin/kubectl")
        #expect(get.status == 0 && get.stdout.contains("namespace/"), "\(get.stdout) \(get.stderr)")
    }

    @Test func gitUsesMooseAsItsCredentialHelper() async throws {
        var (home, environment) = try await CLI.logIn("moose-git")
        defer { try? FileManager.default.removeItem(at: home) }
        let server = try ResourceServer("git_server.py", ["--port", "0", "--cache-seconds", "0"])
        let host =
            try #require(URL(string: server.url)).host.map { "\($0):\(URL(string: server.url)?.port ?? 0)" } ?? ""
        // The config file maps the remote's host to the profile: the helper needs no flags.
        let config = home.appendingPathComponent("config/moose/config.toml")
        try "[hosts]\n\"\(host)\" = \"default\"\n".write(to: config, atomically: true, encoding: .utf8)
        environment["GIT_TERMINAL_PROMPT"] = "0"
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment["HOME"] = home.path
        let helper = ["-c", "credential.helper=", "-c", "credential.helper=!\(CLI.binary) git-credential"]
        func git(_ arguments: [String], stdin: String? = nil) async throws -> CLIResult {
            try await CLI.run(
                ["git"] + helper + arguments, stdin: stdin.map { Data($0.utf8) }, environment: environment, timeout: 60,
                executable: "/usr/bin/git")
        }
        let listed = try await git(["ls-remote", server.url + "/repo.git"])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("refs/heads/main"))
        let token = try await Self.accessToken(environment)
        await #expect(try server.acceptedFingerprints().last == Self.sha256(token))

        // What git is handed: the access token and its expiry, never the refresh token.
        let filled = try await git(["credential", "fill"], stdin: "protocol=http\nhost=\(host)\n\n")
        #expect(filled.status == 0, "\(filled.stderr)")
        #expect(filled.stdout.contains("password=\(token)\n"))
        // git 2.39 (Debian 12) drops attributes it does not know from `fill`; the helper's own answer
        // carries the expiry git ≥ 2.41 reads.
        let direct = try await CLI.run(
            ["git-credential", "get"], stdin: Data("protocol=http\nhost=\(host)\n\n".utf8), environment: environment)
        #expect(direct.status == 0 && direct.stdout.contains("password=\(token)\n"), "\(direct.stderr)")
        #expect(direct.stdout.contains("password_expiry_utc="), "\(direct.stdout)")
        let bearer = try await CLI.run(
            ["git-credential", "get"], stdin: Data("capability[]=authtype\nprotocol=http\nhost=\(host)\n\n".utf8),
            environment: environment)
        #expect(
            bearer.stdout.contains("authtype=Bearer\n") && bearer.stdout.contains("credential=\(token)"),
            "\(bearer.stdout)")
        let refreshToken = try #require(
            (try await CLI.storedSession(environment: environment)["tokens"] as? [String: Any])?["refreshToken"]
                as? String)
        #expect(
            !filled.stdout.contains(refreshToken) && !direct.stdout.contains(refreshToken)
                && !bearer.stdout.contains(refreshToken))

        // git rejects a credential (a 401): moose refreshes that token, and forgets nothing else.
        let rejected = try await git(
            ["credential", "reject"],
            stdin: "protocol=http\nhost=\(host)\nusername=x-access-token\npassword=\(token)\n\n")
        #expect(rejected.status == 0, "\(rejected.stderr)")
        let status = try await CLI.run(["status"], environment: environment)
        #expect(status.status == 0 && status.stdout.contains("default"), "\(status.stdout)")
        await #expect(try Self.accessToken(environment) != token, "the rejected token was not replaced")
        #expect(try await TokenCLITests.familySize(of: refreshToken) == 2)
        // A clone with the new token works.
        let clone = try await git(["clone", "-q", server.url + "/repo.git", home.appendingPathComponent("clone").path])
        #expect(clone.status == 0, "\(clone.stderr)")
        // A host the config does not map gets no answer (git asks its next helper).
        let other = try await git(["credential", "fill"], stdin: "protocol=https\nhost=elsewhere.example\n\n")
        #expect(!other.stdout.contains("password=\(try await Self.accessToken(environment))"))

        // An action git may add later, for a host that maps: ignored without an answer and without a
        // failure, as git asks of its helpers ("it should silently ignore the request", gitcredentials(7)).
        let later = try await CLI.run(
            ["git-credential", "capability"], stdin: Data("protocol=http\nhost=\(host)\n\n".utf8),
            environment: environment)
        #expect(later.status == 0 && later.stdout.isEmpty && later.stderr.isEmpty, "\(later.status) \(later.stderr)")
    }

    /// docker-credential-helpers' protocol, as its README documents it.
    @Test func dockerCredentialHelperProtocol() async throws {
        let (home, environment) = try await CLI.logIn("moose-docker")
        defer { try? FileManager.default.removeItem(at: home) }
        try "[hosts]\n\"registry.example.com\" = \"default\"\n".write(
            to: home.appendingPathComponent("config/moose/config.toml"),
            atomically: true, encoding: .utf8)
        let got = try await CLI.run(
            ["docker-credential", "get"], stdin: Data("https://registry.example.com\n".utf8), environment: environment)
        #expect(got.status == 0, "\(got.stderr)")
        let answer = try #require(try JSONSerialization.jsonObject(with: Data(got.stdout.utf8)) as? [String: String])
        #expect(answer["ServerURL"] == "https://registry.example.com")
        #expect(answer["Username"] == "oauth2accesstoken")
        await #expect(answer["Secret"] == (try Self.accessToken(environment)))
        let unknown = try await CLI.run(
            ["docker-credential", "get"], stdin: Data("other.example.com".utf8), environment: environment)
        #expect(unknown.status == 1 && unknown.stdout.contains("credentials not found in native keychain"))
        let list = try await CLI.run(["docker-credential", "list"], environment: environment)
        #expect(
            (try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: String]) == [
                "registry.example.com": "oauth2accesstoken"
            ])
        let stored = try await CLI.run(
            ["docker-credential", "store"],
            stdin: Data(#"{"ServerURL":"registry.example.com","Username":"u","Secret":"s"}"#.utf8),
            environment: environment)
        #expect(stored.status == 0)
        let erased = try await CLI.run(
            ["docker-credential", "erase"], stdin: Data("registry.example.com".utf8), environment: environment)
        #expect(erased.status == 0)
        #expect(
            try await CLI.run(["status"], environment: environment).stdout.contains("default"),
            "erase wiped the session")
    }

    @Test func execCredentialFollowsKubernetesExecInfo() async throws {
        let (home, environment) = try await CLI.logIn("moose-exec")
        defer { try? FileManager.default.removeItem(at: home) }
        var beta = environment
        beta["KUBERNETES_EXEC_INFO"] =
            #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","spec":{"interactive":false}}"#
        let result = try await CLI.run(["token", "--format", "exec-credential"], environment: beta)
        #expect(result.status == 0, "\(result.stderr)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(
            document["apiVersion"] as? String == "client.authentication.k8s.io/v1beta1"
                && document["kind"] as? String == "ExecCredential")
        let status = try #require(document["status"] as? [String: String])
        await #expect(status["token"] == (try Self.accessToken(environment)))
        #expect(status["expirationTimestamp"]?.hasSuffix("Z") == true)
        var unknown = environment
        unknown["KUBERNETES_EXEC_INFO"] = #"{"apiVersion":"client.authentication.k8s.io/v9"}"#
        #expect(try await CLI.run(["token", "--format", "exec-credential"], environment: unknown).status == 1)
    }

    @Test func completionScriptsLoadInBash() async throws {
        let script = try await CLI.run(["completion", "bash"])
        #expect(script.status == 0 && script.stdout.contains("_moose"))
        let loaded = try await CLI.run(
            ["bash", "-c", "source <(\"$0\" completion bash) && complete -p moose", CLI.binary],
            executable: "/bin/bash")
        #expect(loaded.status == 0 && loaded.stdout.contains("-F _moose moose"), "\(loaded.stdout) \(loaded.stderr)")
        for shell in ["zsh", "fish"] {
            let other = try await CLI.run(["completion", shell])
            #expect(other.status == 0 && other.stdout.contains("moose"), "\(shell)")
        }
        #expect(try await CLI.run(["completion", "tcsh"]).status == 2)
    }
}

/// `moose login`'s wait shows a spinner with the time left on a terminal, and nothing of the kind
/// when its output is piped.
struct LoginProgressTests {
    @Test func aSpinnerWithACountdownOnATerminalOnly() async throws {
        let (home, environment) = CLI.home("moose-progress")
        defer { try? FileManager.default.removeItem(at: home) }
        // A browser that starts and never comes back (`true`): the wait is the browser's. (With
        // --no-browser at a terminal, moose asks for the pasted address instead: no spinner there.)
        let arguments = ["login", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-cli", "--timeout", "2"]
        // Under a pseudo-terminal (python's pty), as a person at the keyboard runs it.
        let script = """
            import os, pty, sys
            out = b""
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(sys.argv[1], sys.argv[1:])
            while True:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            os.waitpid(pid, 0)
            sys.stdout.write(out.decode("utf-8", "replace"))
            """
        var env = environment
        env["TERM"] = "xterm"
        env["BROWSER"] = "true"
        let terminal = try await CLI.run(
            ["python3", "-c", script, CLI.binary] + arguments, environment: env, timeout: 60,
            executable: "/usr/bin/python3")
        #expect(terminal.stdout.contains("⠋") && terminal.stdout.contains(" left"), "\(terminal.stdout)")
        #expect(terminal.stdout.contains("\u{1B}[2K"), "the spinner line is cleared at the end")
        let piped = try await CLI.run(arguments, environment: env, timeout: 60)
        #expect(piped.status == 1)
        #expect(
            !piped.stderr.contains("⠋") && !piped.stderr.contains("\u{1B}")
                && piped.stderr.contains("Waiting for the redirect"))
    }
}
