/// Runs `body`, whose only errors are `JWTError`s thrown through an untyped-`rethrows` standard
/// library closure (such as `String.withUTF8`), and restores the typed error.
@inline(__always)
func typed<R>(_ body: () throws -> R) throws(JWTError) -> R {
    do {
        return try body()
    } catch let error as JWTError {
        throw error
    } catch {
        throw JWTError(JWTError.malformed, "unexpected error: \(error)")
    }
}
