import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseOAuthSystem
import MooseSecretStore
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

/// The configuration file (`$MOOSE_CONFIG`, else `$XDG_CONFIG_HOME/moose/config.toml`): profiles
/// and host → profile mappings, so credential helpers need no flags.
enum CLIConfig {
    static var path: String {
        get throws {
            if let path = getenv("MOOSE_CONFIG").map({ String(cString: $0) }), !path.isEmpty { return path }
            return try StoreOptions.xdg("XDG_CONFIG_HOME", fallback: ".config") + "/moose/config.toml"
        }
    }

    /// The file's path for a message: `path`, or "the config file" where it cannot be named (no HOME).
    static var pathForMessages: String { (try? path) ?? "the config file" }

    /// The file, or an empty configuration when there is none. A file that exists but cannot be
    /// read or parsed is an error (exit 2) that names the line.
    ///
    /// `$MOOSE_CONFIG` naming no file is an error too (a typo would otherwise be ignored silently),
    /// except for a command that writes the file (`creating`: `moose profile use`).
    ///
    /// Without a place for it (no `HOME`, `XDG_CONFIG_HOME` or `MOOSE_CONFIG`) there is no file to read:
    /// a command given `--store` and `--key-file` runs without one; only writing it needs the place.
    static func load(creating: Bool = false) throws -> ProfileFile {
        guard let path = creating ? try self.path : try? self.path else { return ProfileFile() }
        if !creating, let named = getenv("MOOSE_CONFIG").map({ String(cString: $0) }), !named.isEmpty,
            !FileManager.default.fileExists(atPath: named)
        {
            throw CLIError.usage(
                "MOOSE_CONFIG names \(named), which does not exist; create it, "
                    + "or unset MOOSE_CONFIG to use \(try StoreOptions.xdg("XDG_CONFIG_HOME", fallback: ".config"))/moose/config.toml"
            )
        }
        do {
            return try ProfileFile.load(path: path)
        } catch let error as OAuthError {
            throw CLIError.usage(error.message)
        }
    }

    /// What a session command works on, read from the config file once: the profile (`--profile`,
    /// else the file's `default`, else "default"), its settings there, and the store — `--store`,
    /// else `$MOOSE_STORE`, else the profile's `store`, else the default file. A config file that
    /// exists but does not parse is an error (exit 2, naming the file and line) for every command.
    static func resolve(_ option: String?, store: StoreOptions) throws -> ResolvedProfile {
        if let option { try checkName(option) }
        let config = try load()
        let name = config.profileName(option)
        let settings = config.profiles[name]
        var store = store
        if store.storePath == nil, getenv("MOOSE_STORE") == nil, let path = settings?.store, !path.isEmpty {
            store.storePath = path
        }
        return ResolvedProfile(name: name, settings: settings, store: store)
    }
}

extension CLIConfig {
    /// A profile name is 1–200 printable characters: it is a store key, a config section and part of
    /// the next step a message prints (`moose login --profile NAME`), which must paste into a shell.
    static func checkName(_ name: String) throws {
        guard !name.isEmpty, name.utf8.count <= 200, !name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw CLIError.usage("--profile: a profile name is 1–200 printable characters (no control characters)")
        }
    }
}

/// A command's profile after the config file was read (`CLIConfig.resolve`).
struct ResolvedProfile {
    /// The profile's name (the session's storage key).
    let name: String
    /// Its settings in the config file, if it has any there.
    let settings: ProfileFile.ProfileSettings?
    /// The store to use for it.
    let store: StoreOptions
}
