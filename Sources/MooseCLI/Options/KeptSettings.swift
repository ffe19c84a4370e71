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
/// (`profiles.json` in the folder of `$MOOSE_CONFIG`, else `$XDG_CONFIG_HOME/moose/`), one section per
/// store (profiles are a store's): issuer, client, scopes, grant, references to secrets (file paths,
/// variable names — never a secret), CA file, pins, DPoP, port. `moose login` writes it; a logout, a
/// lost master key or a damaged row leaves it, so a plain `moose login --profile P` logs in the same
/// way again after any of them.
///
/// It is read for a *new login* only. A renewal always follows the plan sealed with the session: a
/// file anyone could edit never redirects a refresh token to another issuer.
enum KeptSettings {
    /// The file's path: `profiles.json` in the config file's folder (made absolute).
    static var path: String {
        get throws {
            let config = SessionPlan.absolute(try CLIConfig.path)
            return String(config[..<(config.lastIndex(of: "/") ?? config.startIndex)]) + "/profiles.json"
        }
    }

    /// A store's section name: its path, or its PostgreSQL URL without the password.
    static func section(_ store: StoreOptions) -> String {
        guard let location = try? store.resolvedStorePath else { return "" }
        guard (try? store.isPostgres) == true, let at = location.firstIndex(of: "@"),
            let scheme = location.firstRange(of: "://"), scheme.upperBound < at
        else { return location }
        let credentials = location[scheme.upperBound..<at]
        let user = credentials.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
        return String(location[..<scheme.upperBound]) + user + String(location[at...])
    }

    /// The file as read: every entry that decodes (one that does not is skipped, never the others).
    struct Document: Decodable {
        var stores: [String: [String: Profile]] = [:]

        init() {}

        init(from decoder: any Decoder) throws {
            struct Entry: Decodable {
                let plan: Profile?
                init(from decoder: any Decoder) throws { plan = try? Profile(from: decoder) }
            }
            let container = try decoder.container(keyedBy: Key.self)
            for section in container.allKeys {
                guard let entries = try? container.decode([String: Entry].self, forKey: section) else { continue }
                stores[section.stringValue] = entries.compactMapValues(\.plan)
            }
        }

        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
    }

    /// The document, `nil` when the file exists but is not a JSON object (then it is never
    /// overwritten); an absent file is an empty document.
    static func read() -> Document? {
        struct Stored: Decodable { let stores: Document? }
        guard let path = try? self.path else { return Document() }
        guard FileManager.default.fileExists(atPath: path) else { return Document() }
        guard let bytes = try? SessionPlan.readFile(path, what: "the kept profile settings", limit: 4 << 20),
            let stored = try? JSONDecoder().decode(Stored.self, from: Data(bytes))
        else { return nil }
        return stored.stores ?? Document()
    }

    /// The profiles kept for `store`, by name (each named as its key).
    static func profiles(store: StoreOptions) -> [String: Profile] {
        var profiles: [String: Profile] = [:]
        for (name, plan) in read()?.stores[section(store)] ?? [:] {
            var named = plan
            named.name = name
            profiles[name] = named
        }
        return profiles
    }

    /// The settings `profile` last logged in with on `store`, if kept.
    static func plan(_ profile: String, store: StoreOptions) -> Profile? { profiles(store: store)[profile] }

    /// Keeps `plan` under its name in `store`'s section (other profiles and stores as they were),
    /// under a lock (two logins at once keep both), written whole to a new file that replaces the old
    /// one (mode 0600, folder 0700). A file that exists but cannot be read is left as it is.
    ///
    /// - Throws: a `CLIError` naming the file when it cannot be read or written.
    static func save(_ plan: Profile, store: StoreOptions) throws {
        let path = try self.path
        let folder = String(path.dropLast("/profiles.json".count))
        do {
            try FileManager.default.createDirectory(
                atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw CLIError.failed("could not make the folder \(folder) for the kept profile settings: \(error)")
        }
        let lock = open(path + ".lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard lock >= 0 else {
            throw CLIError.failed("could not lock \(path).lock: \(String(cString: strerror(errno)))")
        }
        defer { close(lock) }
        _ = flock(lock, LOCK_EX)
        guard var document = read() else {
            throw CLIError.failed(
                "\(path) is not a file moose can read (left as it is); move it aside to keep settings again")
        }
        var entries = document.stores[section(store)] ?? [:]
        entries[plan.name] = plan
        document.stores[section(store)] = entries
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do { data = try encoder.encode(File(document)) } catch {
            throw CLIError.failed("could not write the kept profile settings: \(error)")
        }
        let temporary = path + ".new-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600])
        else {
            throw CLIError.failed("could not write \(temporary) (the kept profile settings): permission or space")
        }
        let handle = open(temporary, O_RDONLY | O_CLOEXEC)
        if handle >= 0 {
            _ = fsync(handle)
            close(handle)
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw CLIError.failed("could not replace \(path) (the kept profile settings): \(reason)")
        }
    }

    /// The file's shape as written.
    private struct File: Encodable {
        let version = 1
        let stores: [String: [String: Profile]]
        init(_ document: Document) { stores = document.stores }
    }

    /// Keeps `plan` and says nothing on success; a file that cannot be written is said on standard
    /// error (the login itself succeeded: its session is in the store).
    static func keep(_ plan: Profile, store: StoreOptions) {
        do { try save(plan, store: store) } catch {
            Terminal.error("moose: warning: \(error) (the login itself succeeded)")
        }
    }
}
