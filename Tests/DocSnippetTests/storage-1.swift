// docs/storage.md, ```swift block 1: the region is quoted there word for word (DocSnippetTests).
import Foundation
import MooseOAuth
import MooseTesting
import Testing

/// The app's own storage, here standing in for a Keychain-backed one: the contract runs against it.
func MyKeychainStorage(service: String) -> InMemorySessionStorage { InMemorySessionStorage() }

struct Storage1 {
    // snippet begins
    @Test func myStorageKeepsTheContract() async throws {
        try await SessionStorageContract.verify { MyKeychainStorage(service: "test-\(UUID())") }
    }
    // snippet ends
}
