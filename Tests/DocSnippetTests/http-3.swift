// docs/http.md, ```swift block 3: the region is quoted there word for word (DocSnippetTests).
import MooseHTTP

func http3() throws {
    // snippet begins
    let pins = try PublicKeyPins([
        "id.example.com": [
            "sha256//r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E=",
            "sha256//YLh1dUR9y6Kja30RrAn7JKnbQG/uEtLMkBgFF2Fuihg="
        ]
    ])
    let transport = CurlTransport(pins: pins)
    // snippet ends
    _ = transport
}
