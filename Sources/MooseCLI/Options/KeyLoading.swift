import MooseOAuth

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
