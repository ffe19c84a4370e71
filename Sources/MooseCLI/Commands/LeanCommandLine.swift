/// The command lines of the two commands scripts call in tight loops — `moose inspect` and
/// `moose token` (so also `moose token --format exec-credential`) — read without argument-parser.
///
/// argument-parser reflects over every property wrapper of the command (and over its completion
/// pseudo-commands) on each start: about half of `moose inspect`'s instructions and 40% of `moose
/// token`'s. This reader accepts only a plain, exactly specified subset and answers `nil` for
/// anything else, which then goes through argument-parser as before — so every usage error, `--help`,
/// `-h`, `help`, `--`, abbreviations, repeated single-value options, values that look like options and
/// each message and exit status stay argument-parser's own. For what it accepts it produces the same
/// command, field for field (`LeanCommandLineTests` parses each case both ways and compares).
///
/// The subset:
/// - at most `maximumArguments` arguments, the first `inspect` or `token`;
/// - `--name value` and `--name=value` for the command's options (names compared byte for byte;
///   `value` empty, `-`, or not starting with `-`; a non-empty value after `=`), each single-value
///   option at most once, repeatable options (`inspect --aud`, `--alg`) in order;
/// - `--flag` for its flags, each at most once;
/// - for `inspect`, one positional TOKEN: empty, `-`, or not starting with `-`;
/// - no argument spelled `help`; a typed value (`--leeway`, `--format`) that parses; and a command
///   whose `validate()` passes.
enum LeanCommandLine {
    /// Longer command lines go through argument-parser.
    static let maximumArguments = 64

    /// A command read without argument-parser.
    enum Command {
        case inspect(InspectCommand.Values)
        case token(TokenCommand.Values)

        func run() throws {
            switch self {
            case .inspect(let values): try values.run()
            case .token(let values): try values.run()
            }
        }
    }

    /// The command for `arguments` (without the program name), or `nil` to use argument-parser.
    static func command(_ arguments: [String]) -> Command? {
        guard arguments.count <= maximumArguments, let first = arguments.first else { return nil }
        let rest = arguments.dropFirst()
        if first.utf8.elementsEqual("inspect".utf8) { return inspect(rest).map(Command.inspect) }
        if first.utf8.elementsEqual("token".utf8) { return token(rest).map(Command.token) }
        return nil
    }

    static func inspect(_ arguments: ArraySlice<String>) -> InspectCommand.Values? {
        var values = InspectCommand.Values()
        guard scan(arguments, options: inspectOptions, positional: { $0.token = $1 }, into: &values) else { return nil }
        // A command argument-parser would refuse goes back to it for the message.
        guard (try? values.validate()) != nil else { return nil }
        return values
    }

    static func token(_ arguments: ArraySlice<String>) -> TokenCommand.Values? {
        var values = TokenCommand.Values(
            store: StoreOptions(storePath: nil, keyFile: nil, keyEnvironment: nil, passphraseFile: nil))
        guard scan(arguments, options: tokenOptions, positional: nil, into: &values) else { return nil }
        return values
    }

    /// One long option of the subset.
    struct OptionSpec<Values>: Sendable {
        enum Kind: Sendable {
            /// `--name value` or `--name=value`, at most once.
            case single
            /// `--name value` or `--name=value`, any number of times.
            case repeatable
            /// `--name`, at most once.
            case flag
        }
        /// `--name`.
        let name: String
        let kind: Kind
        /// Stores the value (`""` for a flag); `false` when it does not parse.
        let apply: @Sendable (inout Values, String) -> Bool
    }

    /// `true` when argument-parser reads `argument` as a value: empty, `-`, or not starting with `-`
    /// (`--` and every other dash-prefixed word are options or its terminator).
    static func isPlainValue(_ argument: String) -> Bool {
        argument.utf8.first != UInt8(ascii: "-") || argument.utf8.count == 1
    }

    /// Reads `arguments` into `values`; `false` as soon as something is outside the subset.
    static func scan<Values>(
        _ arguments: ArraySlice<String>, options: [OptionSpec<Values>],
        positional: ((inout Values, String) -> Void)?, into values: inout Values
    ) -> Bool {
        var seen = [Bool](repeating: false, count: options.count)
        var sawPositional = false
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            if argument.utf8.elementsEqual("help".utf8) { return false }
            if isPlainValue(argument) {
                guard let positional, !sawPositional else { return false }
                positional(&values, argument)
                sawPositional = true
                continue
            }
            guard argument.utf8.starts(with: "--".utf8) else { return false }
            // Split as argument-parser does: at the first "=" character.
            let equals = argument.firstIndex(of: "=")
            let name = equals.map { argument[..<$0] } ?? argument[...]
            let attached = equals.map { argument[argument.index(after: $0)...] }
            // `--name=` takes the next argument as its value in argument-parser: not in the subset.
            if let attached, attached.isEmpty { return false }
            guard let found = options.firstIndex(where: { $0.name.utf8.elementsEqual(name.utf8) }) else { return false }
            let option = options[found]
            if option.kind != .repeatable, seen[found] { return false }
            seen[found] = true
            let value: String
            if option.kind == .flag {
                guard attached == nil else { return false }
                value = ""
            } else if let attached {
                value = String(attached)
            } else {
                guard index < arguments.endIndex, isPlainValue(arguments[index]),
                    !arguments[index].utf8.elementsEqual("help".utf8)
                else { return false }
                value = arguments[index]
                index += 1
            }
            guard option.apply(&values, value) else { return false }
        }
        return true
    }

    /// `moose inspect`'s options (`InspectCommand`).
    static let inspectOptions: [OptionSpec<InspectCommand.Values>] = [
        .value("--jwks") { $0.jwks = $1 }, .value("--issuer") { $0.issuer = $1 }, .value("--key") { $0.key = $1 },
        .value("--secret-file") { $0.secretFile = $1 }, .value("--iss") { $0.iss = $1 },
        .repeated("--audience") { $0.aud.append($1) }, .repeated("--aud") { $0.aud.append($1) },
        .flag("--any-audience") { $0.anyAudience = true }, .repeated("--alg") { $0.alg.append($1) },
        OptionSpec(name: "--leeway", kind: .single) { values, text in
            // argument-parser's Double: `Double(String)`.
            guard let seconds = Double(text) else { return false }
            values.leeway = seconds
            return true
        },
        .value("--now") { $0.now = $1 }, .value("--ca-file") { $0.caFile = $1 }, .flag("--json") { $0.json = true }
    ]

    /// `moose token`'s options (`TokenCommand` and its `StoreOptions`), with `TokenCommand`'s defaults.
    static let tokenOptions: [OptionSpec<TokenCommand.Values>] = [
        .value("--store") { $0.store.storePath = $1 }, .value("--key-file") { $0.store.keyFile = $1 },
        .value("--key-env") { $0.store.keyEnvironment = $1 },
        .value("--passphrase-file") { $0.store.passphraseFile = $1 },
        .value("--key-secret-service") { $0.store.keySecretService = $1 }, .value("--profile") { $0.profile = $1 },
        .value("--min-validity") { $0.minValidity = $1 }, .flag("--id-token") { $0.idToken = true },
        OptionSpec(name: "--format", kind: .single) { values, text in
            // argument-parser's RawRepresentable enum: `init(rawValue:)`.
            guard let format = TokenCommand.Format(rawValue: text) else { return false }
            values.format = format
            return true
        },
        .value("--url") { $0.url = $1 }, .value("--method") { $0.method = $1 }, .value("--nonce") { $0.nonce = $1 }
    ]
}

extension LeanCommandLine.OptionSpec {
    /// `--name value`, at most once, any value.
    static func value(_ name: String, _ set: @escaping @Sendable (inout Values, String) -> Void) -> Self {
        Self(name: name, kind: .single) { values, text in
            set(&values, text)
            return true
        }
    }

    /// `--name value`, any number of times, any value.
    static func repeated(_ name: String, _ add: @escaping @Sendable (inout Values, String) -> Void) -> Self {
        Self(name: name, kind: .repeatable) { values, text in
            add(&values, text)
            return true
        }
    }

    /// `--name`, at most once.
    static func flag(_ name: String, _ set: @escaping @Sendable (inout Values) -> Void) -> Self {
        Self(name: name, kind: .flag) { values, _ in
            set(&values)
            return true
        }
    }
}
