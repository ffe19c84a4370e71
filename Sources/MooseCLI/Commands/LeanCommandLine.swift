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
        var values = TokenValues()
        guard scan(arguments, options: tokenOptions, positional: nil, into: &values) else { return nil }
        return TokenCommand.Values(
            store: StoreOptions(
                storePath: values.storePath, keyFile: values.keyFile,
                keyEnvironment: values.keyEnvironment, passphraseFile: values.passphraseFile,
                keySecretService: values.keySecretService),
            profile: values.profile, minValidity: values.minValidity, idToken: values.idToken, format: values.format,
            url: values.url, method: values.method, nonce: values.nonce)
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
        OptionSpec(name: "--jwks", kind: .single) {
            $0.jwks = $1; return true
        },
        OptionSpec(name: "--issuer", kind: .single) {
            $0.issuer = $1; return true
        },
        OptionSpec(name: "--key", kind: .single) {
            $0.key = $1; return true
        },
        OptionSpec(name: "--secret-file", kind: .single) {
            $0.secretFile = $1; return true
        },
        OptionSpec(name: "--iss", kind: .single) {
            $0.iss = $1; return true
        },
        OptionSpec(name: "--audience", kind: .repeatable) {
            $0.aud.append($1); return true
        },
        OptionSpec(name: "--aud", kind: .repeatable) {
            $0.aud.append($1); return true
        },
        OptionSpec(name: "--any-audience", kind: .flag) { values, _ in
            values.anyAudience = true; return true
        },
        OptionSpec(name: "--alg", kind: .repeatable) {
            $0.alg.append($1); return true
        },
        OptionSpec(name: "--leeway", kind: .single) { values, text in
            // argument-parser's Double: `Double(String)`.
            guard let seconds = Double(text) else { return false }
            values.leeway = seconds
            return true
        },
        OptionSpec(name: "--now", kind: .single) {
            $0.now = $1; return true
        },
        OptionSpec(name: "--ca-file", kind: .single) {
            $0.caFile = $1; return true
        },
        OptionSpec(name: "--json", kind: .flag) { values, _ in
            values.json = true; return true
        }
    ]

    /// `moose token`'s options, its `StoreOptions` as plain strings (a `StoreOptions` is made once, at
    /// the end), with `TokenCommand`'s defaults.
    struct TokenValues {
        var storePath: String?
        var keyFile: String?
        var keyEnvironment: String?
        var passphraseFile: String?
        var keySecretService: String?
        var profile: String?
        var minValidity: String? = nil
        var idToken = false
        var format: TokenCommand.Format = .token
        var url: String?
        var method = "GET"
        var nonce: String?
    }

    /// `moose token`'s options (`TokenCommand` and its `StoreOptions`).
    static let tokenOptions: [OptionSpec<TokenValues>] = [
        OptionSpec(name: "--store", kind: .single) {
            $0.storePath = $1; return true
        },
        OptionSpec(name: "--key-file", kind: .single) {
            $0.keyFile = $1; return true
        },
        OptionSpec(name: "--key-env", kind: .single) {
            $0.keyEnvironment = $1; return true
        },
        OptionSpec(name: "--passphrase-file", kind: .single) {
            $0.passphraseFile = $1; return true
        },
        OptionSpec(name: "--key-secret-service", kind: .single) {
            $0.keySecretService = $1; return true
        },
        OptionSpec(name: "--profile", kind: .single) {
            $0.profile = $1; return true
        },
        OptionSpec(name: "--min-validity", kind: .single) {
            $0.minValidity = $1; return true
        },
        OptionSpec(name: "--id-token", kind: .flag) { values, _ in
            values.idToken = true; return true
        },
        OptionSpec(name: "--format", kind: .single) { values, text in
            // argument-parser's RawRepresentable enum: `init(rawValue:)`.
            guard let format = TokenCommand.Format(rawValue: text) else { return false }
            values.format = format
            return true
        },
        OptionSpec(name: "--url", kind: .single) {
            $0.url = $1; return true
        },
        OptionSpec(name: "--method", kind: .single) {
            $0.method = $1; return true
        },
        OptionSpec(name: "--nonce", kind: .single) {
            $0.nonce = $1; return true
        }
    ]
}
