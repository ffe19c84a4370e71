// docs/resource-server.md, ```swift block 10: the region is quoted there word for word (DocSnippetTests).
#if MoosePostgres
import MoosePostgres
import MooseResourceServer

enum ResourceServer10 {
    static func snippet(configuration: ResourceServerConfiguration, keys: any AccessTokenKeySource) throws
        -> ResourceServer
    {
        // snippet begins
        let replays = try PostgresDPoPReplayCache(url: "postgres://api@db.internal/api?sslmode=verify-full")
        Task { await replays.run() } // the connection pool, for as long as the server runs
        let server = ResourceServer(configuration: configuration, keys: keys, replayCache: replays)
        // snippet ends
        return server
    }
}
#endif
