// docs/storage.md, ```swift block 3: the region is quoted there word for word (DocSnippetTests).
import MooseSecretStore

func storage3(dataHome: String, configHome: String, accessToken: String, refreshToken: String) throws {
    // snippet begins
    let store = try SecretStore(
        path: dataHome + "/moose/store.sqlite",
        masterKey: .keyFile(configHome + "/moose/store.key"))
    try store.transaction { tx throws(SecretStoreError) in // both land, or neither
        try tx.put(Array(accessToken.utf8), namespace: "session:default", name: "access_token")
        try tx.put(Array(refreshToken.utf8), namespace: "session:default", name: "refresh_token")
    }
    let refresh = try store.get(namespace: "session:default", name: "refresh_token")
    // snippet ends
    _ = refresh
}
