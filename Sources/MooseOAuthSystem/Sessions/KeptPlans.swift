#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import MooseOAuth
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The plan each profile last logged in with, in a plain JSON file (`moose`'s is `profiles.json` beside
/// its config file: `besideConfig(_:)`), one section per store — profiles are a store's. A plan holds
/// the issuer, the client, scopes, the grant and references to secrets (file paths, variable names:
/// never a secret), CA file, pins, DPoP and port.
///
/// A logout, a lost master key or a damaged session row leaves this file as it is, so a login that
/// follows the kept plan logs in the same way again after any of them. Read it for a *new login*
/// only: a renewal always follows the plan sealed with the session (`SessionPlan.of(_:key:)`), so a
/// file anyone could edit never redirects a refresh token to another issuer.
///
/// ```swift
/// let kept = KeptPlans.besideConfig(try ProfileFile.defaultPath())
/// try kept.keep(plan, forStore: "/home/me/.local/share/moose/store.sqlite")
/// let again = kept.plan(plan.name, forStore: "/home/me/.local/share/moose/store.sqlite")
/// ```
public struct KeptPlans: Sendable {
    /// The file.
    public let path: String

    /// The largest file read, in bytes.
    public static let maximumSize = 4 << 20

    /// The plans kept in the file at `path` (made absolute; it need not exist yet).
    ///
    /// - Parameter path: the JSON file.
    public init(path: String) {
        self.path = SessionPlan.absolute(path)
    }

    /// `profiles.json` in the folder of the config file at `configPath`: where `moose` keeps them.
    ///
    /// - Parameter configPath: the config file (`ProfileFile.defaultPath()` for `moose`'s own).
    /// - Returns: the kept plans beside it.
    public static func besideConfig(_ configPath: String) -> KeptPlans {
        let config = SessionPlan.absolute(configPath)
        return KeptPlans(path: String(config[..<(config.lastIndex(of: "/") ?? config.startIndex)]) + "/profiles.json")
    }

    /// The section name of the store at `location`: a file store's path as it is, a PostgreSQL URL
    /// (`postgres://`, `postgresql://`) without its password — the file holds no secret.
    ///
    /// - Parameter location: the store's path or URL.
    /// - Returns: the section name.
    public static func section(forStore location: String) -> String {
        let lowered = location.lowercased()
        guard lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://"),
            let scheme = location.firstRange(of: "://"), let at = location[scheme.upperBound...].firstIndex(of: "@")
        else { return location }
        let user = location[scheme.upperBound..<at].split(separator: ":", maxSplits: 1).first ?? ""
        return String(location[..<scheme.upperBound]) + user + String(location[at...])
    }

    /// The plans kept for the store at `location`, by profile name (each plan named as its key); none
    /// when the file is not there or cannot be read.
    ///
    /// - Parameter location: the store's path or URL (its section: `section(forStore:)`).
    /// - Returns: the plans.
    public func plans(forStore location: String) -> [String: SessionPlan] {
        var plans: [String: SessionPlan] = [:]
        for (name, plan) in read()?.stores[Self.section(forStore: location)] ?? [:] {
            var named = plan
            named.name = name
            plans[name] = named
        }
        return plans
    }

    /// The plan `profile` last logged in with on the store at `location`, if kept.
    ///
    /// - Parameters:
    ///   - profile: the profile's name.
    ///   - location: the store's path or URL.
    /// - Returns: the plan, named `profile`, or `nil`.
    public func plan(_ profile: String, forStore location: String) -> SessionPlan? {
        plans(forStore: location)[profile]
    }

    /// Keeps `plan` under its name in the section of the store at `location` (other profiles and stores
    /// as they were), under a lock (two logins at once keep both), written whole to a new file that
    /// replaces the old one (mode 0600, folder 0700).
    ///
    /// - Parameters:
    ///   - plan: the plan to keep (its `name` is the profile).
    ///   - location: the store's path or URL.
    /// - Throws: `OAuthError` with `invalidConfiguration` naming the file: its folder or lock cannot be
    ///   made, it exists but is not a file of kept plans (it is left as it is), or it cannot be written.
    public func keep(_ plan: SessionPlan, forStore location: String) throws {
        let folder = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        do {
            try FileManager.default.createDirectory(
                atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw Self.failure("could not make the folder \(folder) for the kept profile settings: \(error)")
        }
        let lock = open(path + ".lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw Self.failure("could not lock \(path).lock: \(String(cString: strerror(errno)))") }
        defer { close(lock) }
        _ = flock(lock, LOCK_EX)
        guard var document = read() else {
            throw Self.failure(
                "\(path) is not a file moose can read (left as it is); move it aside to keep settings again")
        }
        let section = Self.section(forStore: location)
        document.stores[section, default: [:]][plan.name] = plan
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do { data = try encoder.encode(File(stores: document.stores)) } catch {
            throw Self.failure("could not write the kept profile settings: \(error)")
        }
        let temporary = path + ".new-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600])
        else {
            throw Self.failure("could not write \(temporary) (the kept profile settings): permission or space")
        }
        let handle = open(temporary, O_RDONLY | O_CLOEXEC)
        if handle >= 0 {
            _ = fsync(handle)
            close(handle)
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw Self.failure("could not replace \(path) (the kept profile settings): \(reason)")
        }
    }

    private static func failure(_ message: String) -> OAuthError {
        OAuthError(OAuthError.invalidConfiguration, message)
    }

    /// The file as read: every entry that decodes (one that does not is skipped, never the others).
    struct Document: Decodable {
        var stores: [String: [String: SessionPlan]] = [:]

        init() {}

        init(from decoder: any Decoder) throws {
            struct Entry: Decodable {
                let plan: SessionPlan?
                init(from decoder: any Decoder) throws { plan = try? SessionPlan(from: decoder) }
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

    /// The file's shape as written.
    private struct File: Encodable {
        var version = 1
        let stores: [String: [String: SessionPlan]]
    }

    /// The document, `nil` when the file exists but is not a JSON object (then it is never
    /// overwritten); an absent file is an empty document.
    func read() -> Document? {
        struct Stored: Decodable { let stores: Document? }
        guard FileManager.default.fileExists(atPath: path) else { return Document() }
        guard let bytes = try? SessionPlan.readFile(path, what: "the kept profile settings", limit: Self.maximumSize),
            let stored = try? JSONDecoder().decode(Stored.self, from: Data(bytes))
        else { return nil }
        return stored.stores ?? Document()
    }
}
