import Foundation
import MooseOAuthSystem
import Testing

/// The docker-credential-helpers protocol: the inputs docker writes and the answers it reads.
@Suite struct DockerCredentialHelperTests {
    @Test func theServerURLAndItsHost() throws {
        #expect(
            try DockerCredentialHelper.serverURL(parsing: Array(" https://registry.example.com\r\n".utf8))
                == "https://registry.example.com")
        let hosts = [
            "https://registry.example.com": "registry.example.com",
            "https://registry.example.com:5000/v2/": "registry.example.com:5000",
            "registry.example.com": "registry.example.com",
            "registry.example.com/v1/": "registry.example.com",
            " \n": ""
        ]
        for (url, host) in hosts { #expect(DockerCredentialHelper.host(ofServerURL: url) == host, "\(url)") }
        let big = [UInt8](repeating: 0x61, count: DockerCredentialHelper.maximumInputSize + 1)
        #expect(
            helperErrorCode { try DockerCredentialHelper.serverURL(parsing: big) }
                == CredentialHelperError.inputTooLarge)
    }

    @Test func credentialsAsDockerWritesAndReadsThem() throws {
        let stored = try DockerCredentials(
            parsing: Array(#"{"ServerURL":"registry.example.com","Username":"u","Secret":"s3cret","Other":1}"#.utf8))
        #expect(stored == DockerCredentials(serverURL: "registry.example.com", username: "u", secret: "s3cret"))
        #expect(!"\(stored)".contains("s3cret") && !String(reflecting: stored).contains("s3cret"))
        #expect(
            stored.serialized() == #"{"ServerURL":"registry.example.com","Username":"u","Secret":"s3cret"}"#)
        #expect(try DockerCredentials(parsing: Array(stored.serialized().utf8)) == stored)
        let noSecret = try DockerCredentials(parsing: Array(#"{"ServerURL":"r","Username":"u"}"#.utf8))
        #expect(noSecret.secret.isEmpty)
        for bad in [
            "", "[]", "not json", #"{"ServerURL":"r"}"#, #"{"ServerURL":"","Username":"u"}"#,
            #"{"ServerURL":"r","Username":"u","Secret":5}"#
        ] {
            #expect(
                helperErrorCode { try DockerCredentials(parsing: Array(bad.utf8)) }
                    == CredentialHelperError.malformedInput,
                "\(bad)")
        }
    }

    @Test func theListAnswerIsSortedJSON() throws {
        let answer = DockerCredentialHelper.listAnswer(["b.example": "oauth2accesstoken", "a.example": "x"])
        #expect(answer == #"{"a.example":"x","b.example":"oauth2accesstoken"}"#)
        #expect(DockerCredentialHelper.listAnswer([:]) == "{}")
        #expect(DockerCredentialHelper.notFound == "credentials not found in native keychain")
        #expect(
            DockerCredentialHelper.Action(rawValue: "list") == .list
                && DockerCredentialHelper.Action(rawValue: "x") == nil)
    }
}
