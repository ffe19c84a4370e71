import MooseCrypto
import Testing

/// Expects `body` to throw a `CryptographyError` with `code` (a code is not itself an `Error`, so
/// `#expect(throws:)` cannot match it).
func expectCode<R>(
    _ code: CryptographyError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) {
    do {
        _ = try body()
        Issue.record("expected CryptographyError.\(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as CryptographyError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected CryptographyError.\(code), got \(error)", sourceLocation: sourceLocation)
    }
}
