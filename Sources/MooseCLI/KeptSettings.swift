import MooseOAuth
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The settings each profile last logged in with, in a plain file beside the config file
/// (`profiles.json` in the folder of `$MOOSE_CONFIG`, else `$XDG_CONFIG_HOME/moose/`): issuer, client,
/// scopes, grant, references to secrets (file paths, variable names — never a secret), CA file,
/// pins, DPoP, port. `moose login` writes it; a logout, a lost master key or a damaged row leaves
/// it, so a plain `moose login --profile P` logs in the same way again after any of them.
///
/// It is read for a *new login* only. A renewal always follows the plan sealed with the session: a
/// file anyone could edit never redirects a refresh token to another issuer.
enum KeptSettings {
    /// The file's path: `profiles.json` in the config file's folder.
    static var path: String {
        get throws {
            let config = try CLIConfig.path
            let folder = config.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(
                separator: "/")
            return (folder.isEmpty ? "." : folder) + "/profiles.json"
        }
    }

    /// The file's shape: a version and the plans by profile name.
    struct Document: Codable {
        var version = 1
        var profiles: [String: Profile] = [:]
    }

    /// Every kept profile; an absent, unreadable or garbled file keeps nothing (a login then needs
    /// its settings given again — never a crash, never a half-read plan).
    static func load() -> [String: Profile] {
        guard let path = try? self.path,
            let bytes = try? SessionPlan.readFile(path, what: "the kept profile settings", limit: 4 << 20),
            let document = try? JSONDecoder().decode(Document.self, from: Data(bytes))
        else { return [:] }
        var profiles: [String: Profile] = [:]
        for (name, plan) in document.profiles {
            var named = plan
            named.name = name
            profiles[name] = named
        }
        return profiles
    }

    /// The settings `profile` last logged in with, if kept.
    static func plan(_ profile: String) -> Profile? { load()[profile] }

    /// Keeps `plan` under its name (replacing what was kept for it; other profiles stay as they
    /// were), written whole to a new file that replaces the old one (mode 0600, folder 0700).
    ///
    /// - Throws: a `CLIError` naming the file when it cannot be written.
    static func save(_ plan: Profile) throws {
        let path = try self.path
        var document = Document()
        document.profiles = load()
        document.profiles[plan.name] = plan
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do { data = try encoder.encode(document) } catch {
            throw CLIError.failed("could not write the kept profile settings: \(error)")
        }
        let folder = String(path.dropLast("/profiles.json".count))
        do {
            try FileManager.default.createDirectory(
                atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw CLIError.failed("could not make the folder \(folder) for the kept profile settings: \(error)")
        }
        let temporary = path + ".new-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600])
        else {
            throw CLIError.failed("could not write \(temporary) (the kept profile settings): permission or space")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw CLIError.failed("could not replace \(path) (the kept profile settings): \(reason)")
        }
    }

    /// Keeps `plan` and says nothing on success; a file that cannot be written is said on standard
    /// error (the login itself succeeded: its session is in the store).
    static func keep(_ plan: Profile) {
        do { try save(plan) } catch {
            Terminal.error("moose: warning: \(error) (the login itself succeeded)")
        }
    }
}
