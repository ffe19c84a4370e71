import MooseHTTP
import MooseOAuth
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files the commands read whole: a token file, a passphrase file, a client secret file. (Verification
/// keys are the library's: `VerificationKeys`.)
enum KeyLoading {
    /// Reads a whole file, with a size limit and a clear error (`SessionPlan.readFile`'s, as a usage
    /// error): at most `limit` + 1 bytes, so a FIFO such as `<(command)` works.
    static func readFile(_ path: String, what: String, limit: Int = 1 << 20) throws -> [UInt8] {
        do {
            return try SessionPlan.readFile(path, what: what, limit: limit)
        } catch let error as OAuthError {
            throw CLIError.usage(error.message)
        }
    }
}

/// A secret or token the command line says where to find: a file (`-`: standard input, where
/// `standardInput` allows it) or an environment variable. Read whole and bounded, surrounding
/// whitespace dropped; a variable that is not set and a value that is empty are usage errors naming
/// `what` (the variable's name escaped).
enum SecretInput {
    /// The value, or `nil` when neither `file` nor `variable` is given.
    static func read(
        file: String?, variable: String?, what: String, limit: Int = 1 << 20, standardInput: Bool = false
    ) throws -> String? {
        let text: String
        if let file, file == "-", standardInput {
            guard let bytes = try Terminal.readStandardInput(limit: limit) else {
                let size = limit >= 1 << 20 ? "\(limit >> 20) MiB" : "\(limit >> 10) KiB"
                throw CLIError.usage("standard input is larger than \(size); that is not a \(what)")
            }
            text = String(decoding: bytes, as: UTF8.self)
        } else if let file {
            text = String(decoding: try KeyLoading.readFile(file, what: "\(what) file", limit: limit), as: UTF8.self)
        } else if let variable {
            guard let value = getenv(variable).map({ String(cString: $0) }), !value.isEmpty else {
                throw CLIError.usage("the environment variable \(Terminal.safe(variable)) (the \(what)) is not set")
            }
            text = value
        } else {
            return nil
        }
        let value = text.trimmingASCIIWhitespace()
        guard !value.isEmpty else { throw CLIError.usage("the \(what) is empty") }
        return value
    }
}
