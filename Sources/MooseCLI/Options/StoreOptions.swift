import ArgumentParser
import MooseJWT
import MooseOAuth
import MooseSecretStore
import MooseSQLiteStorage
import MooseSealing
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

/// Where the store and its master key are, shared by every command that opens the store.
struct StoreOptions: ParsableArguments {
    @Option(
        name: .customLong("store"),
        help: ArgumentHelp(
            "The store: a file (default: $MOOSE_STORE, else $XDG_DATA_HOME/moose/store.sqlite) or a postgres://USER@HOST/DB URL shared by several machines.",
            valueName: "PATH|URL"))
    var storePath: String?

    @Option(
        name: .customLong("key-file"),
        help: ArgumentHelp(
            "Master key file, 32 bytes, mode 0600 (default: $XDG_CONFIG_HOME/moose/store.key).", valueName: "PATH"))
    var keyFile: String?

    @Option(
        name: .customLong("key-env"),
        help: ArgumentHelp("Read the master key (base64) from this environment variable.", valueName: "VAR"))
    var keyEnvironment: String?

    @Option(
        name: .customLong("passphrase-file"),
        help: ArgumentHelp("Derive the master key from the passphrase in this file (scrypt).", valueName: "FILE"))
    var passphraseFile: String?

    @Option(
        name: .customLong("key-secret-service"),
        help: ArgumentHelp(
            "Keep the master key in the freedesktop Secret Service (GNOME Keyring, KWallet…) as the item NAME (made with the store; needs libsecret and an unlocked keyring).",
            valueName: "NAME"))
    var keySecretService: String?

    /// `$HOME` when it names an absolute folder; `nil` when it is unset, empty or relative.
    static func home() -> String? {
        guard let home = getenv("HOME").map({ String(cString: $0) }), home.hasPrefix("/") else { return nil }
        return home
    }

    /// An XDG base folder: `$variable` when absolute, else `$HOME/fallback`. Without either, a clear
    /// usage error — never a store or a key under the current directory.
    static func xdg(_ variable: String, fallback: String) throws -> String {
        if let value = getenv(variable).map({ String(cString: $0) }), value.hasPrefix("/") { return value }
        guard let home = home() else {
            let next =
                "moose keeps its store, key and config under your home folder and will not put secrets in the current directory; "
            if let value = getenv("HOME").map({ String(cString: $0) }), !value.isEmpty {
                // Set, but relative: said as it is (a relative HOME would be the current directory's).
                throw CLIError.usage(
                    "HOME is not an absolute path (HOME=\(value)), nor is \(variable) set to one: " + next
                        + "set HOME to your home folder's absolute path, or give --store and --key-file (or MOOSE_STORE, MOOSE_CONFIG)"
                )
            }
            throw CLIError.usage(
                "HOME is not set (nor \(variable)): " + next
                    + "set HOME, or give --store and --key-file (or MOOSE_STORE, MOOSE_CONFIG)")
        }
        return home + "/" + fallback
    }

    /// The variables `moose`'s default store and key depend on (read with `getenv`: no environment
    /// dictionary is built on `moose token`'s fast path).
    static var locationEnvironment: [String: String] {
        var values: [String: String] = [:]
        for name in ["MOOSE_STORE", "MOOSE_STORE_KEY", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME"] {
            if let value = getenv(name) { values[name] = String(cString: value) }
        }
        return values
    }

    /// The store: `--store`, else the library's default (`EncryptedSessionStorage.mooseStorePath`:
    /// `$MOOSE_STORE`, else `$XDG_DATA_HOME/moose/store.sqlite`, else under `$HOME`), else a usage error.
    var resolvedStorePath: String {
        get throws {
            if let storePath { return storePath }
            if let path = EncryptedSessionStorage.mooseStorePath(environment: StoreOptions.locationEnvironment) {
                return path
            }
            return try StoreOptions.xdg("XDG_DATA_HOME", fallback: ".local/share") + "/moose/store.sqlite"
        }
    }

    /// `true` when the store is a PostgreSQL database (`postgres://…`, `postgresql://…`), not a file.
    var isPostgres: Bool {
        get throws { EncryptedSessionStorage.namesPostgreSQLDatabase(try resolvedStorePath) }
    }

    /// The master key the options name, else the default one.
    func keySource() throws -> MasterKeySource {
        if let named = try Self.keySource(
            keyFile: keyFile, environment: keyEnvironment, passphraseFile: passphraseFile,
            secretService: keySecretService, options: "--key-file, --key-env, --passphrase-file, --key-secret-service")
        {
            return named
        }
        // The library's default (`EncryptedSessionStorage.mooseMasterKey`), which an app opening moose's store uses too.
        if let source = EncryptedSessionStorage.mooseMasterKey(environment: StoreOptions.locationEnvironment) {
            return source
        }
        return .keyFile(try StoreOptions.xdg("XDG_CONFIG_HOME", fallback: ".config") + "/moose/store.key")
    }

    /// The master key one of the given options names (`moose store rotate-key`'s `--to-…` too), `nil`
    /// for none; more than one is a usage error that lists `options`. A passphrase file is read here
    /// (at most 4 KiB, its line ending trimmed).
    static func keySource(
        keyFile: String? = nil, environment: String?, passphraseFile: String?, secretService: String?, options: String
    ) throws -> MasterKeySource? {
        guard [keyFile, environment, passphraseFile, secretService].count(where: { $0 != nil }) <= 1 else {
            throw CLIError.usage("give only one of \(options)")
        }
        if let environment { return .environment(environment) }
        if let secretService { return .secretService(secretService) }
        if let passphraseFile {
            let bytes = try KeyLoading.readFile(passphraseFile, what: "passphrase file", limit: 4096)
            return .passphrase(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: ["\n", "\r"]))
        }
        return keyFile.map { .keyFile($0) }
    }

    func open(create: Bool = false) throws -> SecretStore {
        guard try !isPostgres else {
            throw CLIError.usage(
                "this command needs a file store; --store (or MOOSE_STORE) names a PostgreSQL database, "
                    + "where moose store init, check and rotate-key work, and sessions are managed with login, status, token, refresh and logout"
            )
        }
        do {
            return try SecretStore(path: try resolvedStorePath, masterKey: try keySource(), create: create)
        } catch let error as SecretStoreError {
            if let wayOut = resetAdvice(error) { throw CLIError.failed("\(error.message); \(wayOut) [\(error.code)]") }
            guard !create, let said = withInitAdvice(error) else { throw StoreOptions.cliError(error) }
            throw CLIError.failed("\(said) [\(error.code)]")
        }
    }

    /// A fault only a new store mends, met by a command that does not create one, said with the command
    /// that does: a damaged file whose own words say to move it aside and start over, or none there at
    /// all. The command names the store when it is not the default (given with --store, or by the
    /// profile's `store`): a plain `moose store init` inits the default one. `nil` for any other fault.
    func withInitAdvice(_ error: SecretStoreError) -> String? {
        let command = storePath.map { "`moose store init --store \(Shell.quote($0))`" } ?? "`moose store init`"
        if error.code == SecretStoreError.corrupt {
            return error.message.hasSuffix("to start over with a new store") ? "\(error.message) (\(command))" : nil
        }
        guard error.code == SecretStoreError.io, let path = try? resolvedStorePath,
            !FileManager.default.fileExists(atPath: path)
        else { return nil }
        return "no store at \(path); \(command) makes one"
    }

    /// The way out of a store whose master key is lost or is another key: `moose store reset` with the
    /// options this command was given (so it works as printed), which moves the store aside and starts a
    /// new one; `nil` for faults a reset does not mend (permissions, a busy or damaged store — whose own
    /// words say how to start over —, one of a newer Moose, a bad argument).
    func resetAdvice(_ error: SecretStoreError) -> String? {
        guard error.code == SecretStoreError.keyUnavailable || error.code == SecretStoreError.wrongKey else {
            return nil
        }
        // A key from a variable (`--key-env`, or `MOOSE_STORE_KEY`) or a keyring: set it, rather than
        // start over (a reset would read the same key).
        if error.code == SecretStoreError.keyUnavailable {
            switch try? keySource() {
            case .environment?, .secretService?: return nil
            default: break
            }
        }
        let when = error.code == SecretStoreError.keyUnavailable ? "if the key is lost" : "if its own key is lost"
        return "\(when), start over with \(resetCommand) (it moves the store aside with a dated name and "
            + "makes a new one; profile settings are kept, so moose login logs in again)"
    }

    /// `moose store reset` with this command's store and key options, quoted for a shell.
    var resetCommand: String {
        var words = ["moose store reset"]
        if let storePath { words.append("--store \(Shell.quote(storePath))") }
        if let keyFile { words.append("--key-file \(Shell.quote(keyFile))") }
        if let passphraseFile { words.append("--passphrase-file \(Shell.quote(passphraseFile))") }
        if let keyEnvironment { words.append("--key-env \(Shell.quote(keyEnvironment))") }
        if let keySecretService { words.append("--key-secret-service \(Shell.quote(keySecretService))") }
        return words.joined(separator: " ")
    }

    /// A store fault as the CLI says it: the store's words (which name the file and the next step),
    /// then its code in brackets, as every message ends. A bad argument is a usage error (exit 2).
    static func cliError(_ error: SecretStoreError) -> CLIError {
        error.code == SecretStoreError.invalidArgument
            ? .usage(error.message) : .failed("\(error.message) [\(error.code)]")
    }
}

extension StoreOptions {
    /// The options as given, without argument-parser: for the lean command line of `moose token`
    /// (`LeanCommandLine`, which must know each option's name). Sets every option above — one left
    /// unset would stop the program when read.
    init(
        storePath: String?, keyFile: String?, keyEnvironment: String?, passphraseFile: String?,
        keySecretService: String? = nil
    ) {
        self.init()
        self.storePath = storePath
        self.keyFile = keyFile
        self.keyEnvironment = keyEnvironment
        self.passphraseFile = passphraseFile
        self.keySecretService = keySecretService
    }
}

extension String {
    func trimmingCharacters(in set: Set<Character>) -> String {
        var text = Substring(self)
        while let last = text.last, set.contains(last) { text.removeLast() }
        return String(text)
    }
}
