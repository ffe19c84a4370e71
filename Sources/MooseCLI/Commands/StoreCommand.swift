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

/// `moose store …`: the encrypted secret store from the shell.
struct StoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Manage the encrypted secret store.",
        discussion: HelpText.examples(
            "moose store init", "printf %s \"$SECRET\" | moose store put --namespace ci deploy-key",
            "moose store get --namespace ci deploy-key", "moose store check"),
        subcommands: [Init.self, Put.self, Get.self, List.self, Remove.self, RotateKey.self, Check.self, Reset.self]
    )

    /// `moose store reset`: the way out of a store that cannot be opened (its key lost, another key,
    /// a file that is no store). The store file (and SQLite's `-wal`/`-shm` beside it) is moved aside
    /// under a dated name — kept, never deleted: with its old key it opens again — and a new, empty
    /// store is made with the key as it is now (a missing key file is made anew). The profiles'
    /// settings are kept beside the config file (`KeptSettings`), so `moose login --profile P` logs in
    /// as before.
    struct Reset: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reset",
            abstract: "Move a store that cannot be opened aside (dated, kept) and start a new one; settings are kept.",
            discussion: HelpText.examples("moose store reset", "moose store reset && moose login --profile work"))
        @OptionGroup var options: StoreOptions

        func run() throws {
            guard try !options.isPostgres else {
                throw CLIError.usage(
                    "moose store reset moves a store file aside; a PostgreSQL store is shared and is not reset by moose "
                        + "(a wrong key there: give the right one with --key-file, --key-env or --passphrase-file)")
            }
            let path = try options.resolvedStorePath
            let moved: String?
            do {
                // Only a store whose key is lost (or is another key) is moved aside: a busy, unreadable or
                // damaged store, or one of a newer Moose, is said as it is and left where it is.
                switch try SecretStore.reset(path: path, masterKey: try options.keySource()) {
                case .opensWithItsKey:
                    Terminal.out(
                        "the store \(path) opens with its key: nothing to reset (moose store check verifies every value)"
                    )
                    return
                case .created(let movedAside): moved = movedAside
                }
            } catch let error as SecretStoreError where error.code == SecretStoreError.invalidArgument {
                throw CLIError.failed("\(error.message), then run moose store init [\(error.code)]")
            } catch let error as SecretStoreError {
                throw StoreOptions.cliError(error)
            }
            let kept = KeptSettings.profiles(store: options).keys.sorted()
            var lines: [String] = []
            if let moved {
                lines.append("moved the store aside to \(moved) (kept: it opens again with its old key)")
            }
            lines.append("created store \(path)")
            if !kept.isEmpty {
                let where_ = (try? KeptSettings.path) ?? "the kept settings"
                lines.append(
                    "settings kept in \(where_) for \(kept.map { Terminal.safe($0) }.joined(separator: ", ")): "
                        + "\(loginHint(kept.contains("default") ? "default" : kept[0])) logs in again")
            }
            Terminal.out(lines.joined(separator: "\n"))
        }
    }

    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init", abstract: "Create the store (and its key file) if missing.",
            discussion: HelpText.examples(
                "moose store init", "moose store init --store ~/work.sqlite --key-file ~/.config/moose/work.key"))
        @OptionGroup var options: StoreOptions

        func run() throws {
            guard try !options.isPostgres else {
                let sessions = try CLISessions.maintained(options, create: true)
                defer { sessions.close() }
                Terminal.out(try sessions.maintain { try await $0.prepareStore() })
                return
            }
            // A file store is opened and closed here, on this thread: SQLite removes its write-ahead log
            // when the last connection closes, which a task outliving the command (the storage captured by
            // an async `prepareStore()`) could leave for after the process exits — and a store truncated
            // later beside a leftover log then reads as foreign, not as the empty file it is.
            let path = try options.resolvedStorePath
            let existed = FileManager.default.fileExists(atPath: path)
            _ = try options.open(create: true)
            // Said as this command found it: made now, or there already with its key.
            Terminal.out(existed ? "store \(path) already exists; key OK" : "created store \(path)")
        }
    }

    struct Put: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "put",
            abstract: "Store a value read from standard input (never from the command line).",
            discussion: HelpText.examples(
                "printf %s \"$API_KEY\" | moose store put --namespace ci api-key",
                "moose store put db-password < secret.txt"))
        @OptionGroup var options: StoreOptions
        @Option(help: "The namespace.") var namespace = "default"
        @Argument(help: "The value's name.") var name: String

        func run() throws {
            let store = try options.open(create: true)
            let value: [UInt8]
            if Terminal.stdinIsTerminal {
                value = Array(try Terminal.readSecretLine(prompt: "value for \(namespace)/\(name): ").utf8)
            } else {
                guard let bytes = try Terminal.readStandardInput(limit: 16 << 20) else {
                    throw CLIError.usage("the value on standard input is larger than 16 MiB")
                }
                value = bytes
            }
            do { try store.put(value, namespace: namespace, name: name) } catch { throw StoreOptions.cliError(error) }
        }
    }

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "get", abstract: "Print a value (exactly as stored).",
            discussion: HelpText.examples(
                "moose store get --namespace ci api-key", "curl -H \"X-Api-Key: $(moose store get api-key)\" …"))
        @OptionGroup var options: StoreOptions
        @Option(help: "The namespace.") var namespace = "default"
        @Argument(help: "The value's name.") var name: String

        func run() throws {
            let store = try options.open()
            let value: [UInt8]?
            do { value = try store.get(namespace: namespace, name: name) } catch { throw StoreOptions.cliError(error) }
            guard let value else { throw CLIError.failed("no value \(namespace)/\(name)") }
            var bytes = value
            if Terminal.stdoutIsTerminal, bytes.last != 0x0A { bytes.append(0x0A) }
            Terminal.writeStandardOutput(bytes)
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List names (never values).",
            discussion: HelpText.examples("moose store list", "moose store list --json"))
        @OptionGroup var options: StoreOptions
        @Option(help: "Only this namespace.") var namespace: String?
        @Flag(help: "One JSON array for scripts.") var json = false

        func run() throws {
            let store = try options.open()
            let entries: [SecretStore.Entry]
            do { entries = try store.list(namespace: namespace) } catch { throw StoreOptions.cliError(error) }
            if json {
                let items: [JSONValue] = entries.map {
                    .object([
                        "namespace": .string($0.namespace), "name": .string($0.name),
                        "updated": .string(ISO8601.string(from: $0.updatedAt))
                    ])
                }
                Terminal.out(JSONValue.array(items).serialized())
            } else {
                for entry in entries {
                    Terminal.out("\(entry.namespace)/\(entry.name)\t\(ISO8601.string(from: entry.updatedAt))")
                }
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Remove a value.",
            discussion: HelpText.examples("moose store rm --namespace ci api-key"))
        @OptionGroup var options: StoreOptions
        @Option(help: "The namespace.") var namespace = "default"
        @Argument(help: "The value's name.") var name: String

        func run() throws {
            let store = try options.open()
            let removed: Bool
            do { removed = try store.delete(namespace: namespace, name: name) } catch {
                throw StoreOptions.cliError(error)
            }
            guard removed else { throw CLIError.failed("no value \(namespace)/\(name)") }
        }
    }

    struct RotateKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-key",
            abstract: "Rotate the data key (re-encrypt every value) or, with --master, the master key.",
            discussion: """
                --master with a key file writes a fresh random key to the same path (the old key is kept \
                until the rewrap has committed). --to-key-env / --to-passphrase-file / --to-secret-service \
                move the store to another kind of master key.

                """ + "\n"
                    + HelpText.examples(
                        "moose store rotate-key", "moose store rotate-key --master",
                        "moose store rotate-key --master --to-key-env MOOSE_STORE_KEY"))
        @OptionGroup var options: StoreOptions
        @Flag(help: "Rotate the master key instead of the data key.") var master = false
        @Option(
            name: .customLong("to-key-env"),
            help: ArgumentHelp("New master key from this environment variable.", valueName: "VAR"))
        var toKeyEnvironment: String?
        @Option(
            name: .customLong("to-passphrase-file"),
            help: ArgumentHelp("New master key from this passphrase file.", valueName: "FILE"))
        var toPassphraseFile: String?
        @Option(
            name: .customLong("to-secret-service"),
            help: ArgumentHelp(
                "New master key made and kept in the Secret Service as the item NAME.", valueName: "NAME"))
        var toSecretService: String?

        /// The new master key a --to-… option names; `nil` for none.
        func newKeySource() throws -> MasterKeySource? {
            try StoreOptions.keySource(
                environment: toKeyEnvironment, passphraseFile: toPassphraseFile, secretService: toSecretService,
                options: "--to-key-env, --to-passphrase-file, --to-secret-service")
        }

        func run() throws {
            let sessions = try CLISessions.maintained(options)
            defer { sessions.close() }
            let named = try newKeySource()
            guard master || named != nil else {
                Terminal.out(try sessions.maintain { try await $0.rotateStoreDataKey() })
                return
            }
            let newKey: MasterKeySource
            var keyFile: String? = nil
            if let named {
                newKey = named
            } else {
                guard case .keyFile(let path) = try options.keySource() else {
                    throw CLIError.usage(
                        "--master without a key file needs --to-key-env, --to-passphrase-file or --to-secret-service")
                }
                // A fresh key beside the old one, which stays until the rewrap has committed.
                unlink(path + ".new")
                newKey = .keyFile(path + ".new")
                keyFile = path
            }
            let done = try sessions.maintain { try await $0.rotateStoreMasterKey(to: newKey) }
            if let path = keyFile, rename(path + ".new", path) != 0 {
                throw CLIError.failed("the store now uses \(path).new; renaming it to \(path) failed: move it by hand")
            }
            Terminal.out(done)
        }
    }

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Open every value and report wrong key, tampered or corrupt rows (changes nothing).",
            discussion: HelpText.examples("moose store check", "moose store check --store postgres://moose@db/moose"))
        @OptionGroup var options: StoreOptions

        func run() throws {
            let sessions = try CLISessions.maintained(options)
            defer { sessions.close() }
            let report = try sessions.maintain { try await $0.checkStore() }
            for line in report.lines { Terminal.out(line) }
            if !report.isHealthy { throw Status.failed }
        }
    }
}
