#if MoosePostgres
import Foundation
import MoosePostgres
import MooseResourceServer
import PostgresNIO
import Testing

extension PostgresTests {
    /// No client can starve another through the shared DPoP replay cache: one proof key's unexpired
    /// rows are counted in the statement that inserts, and past `maximumEntriesPerKey` only that key is
    /// refused (`DPoPReplayQuotaExceeded`); replays stay replays; expired rows do not count.
    @Suite struct DPoPReplayFairness {
        /// The quota refusal `body` throws; `nil` (and an issue recorded) for anything else.
        static func quotaRefusal(_ body: () async throws -> Bool) async -> DPoPReplayQuotaExceeded? {
            do {
                let first = try await body()
                Issue.record("admitted (first use: \(first)) where the key's quota should refuse it")
            } catch let quota as DPoPReplayQuotaExceeded {
                return quota
            } catch {
                Issue.record("refused with \(error), not DPoPReplayQuotaExceeded")
            }
            return nil
        }

        @Test(arguments: ["direct", "pgbouncer"])
        func aFlooderIsRefusedAtItsQuotaAndOthersAreAdmitted(_ route: String) async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            let url = route == "direct" ? try PG.direct(schema: schema) : try PG.bouncer(schema: schema)
            let replicas = try (0..<2).map { _ in try PostgresDPoPReplayCache(url: url, maximumEntriesPerKey: 3) }
            try await DPoPReplays.running(replicas) {
                let later = Date().addingTimeInterval(300)
                // Expired rows of the flooder do not count against it.
                for index in 0..<3 {
                    #expect(
                        try await replicas[index % 2].firstUse(
                            of: "flood old \(index)", until: Date().addingTimeInterval(-1), proofKey: "flood"))
                }
                for index in 0..<3 {
                    #expect(
                        try await replicas[index % 2].firstUse(of: "flood \(index)", until: later, proofKey: "flood"))
                }
                // The quota is shared by the replicas: the fourth unexpired row is refused at either.
                for replica in replicas {
                    let refused = try #require(
                        await Self.quotaRefusal {
                            try await replica.firstUse(of: "flood 3", until: later, proofKey: "flood")
                        })
                    #expect(refused.held == 3 && refused.share == 3)
                }
                // Another key is admitted; replays are refused for both, the flooder at its quota included.
                #expect(try await replicas[1].firstUse(of: "other 0", until: later, proofKey: "other"))
                #expect(try await !replicas[0].firstUse(of: "other 0", until: later, proofKey: "other"))
                #expect(try await !replicas[0].firstUse(of: "flood 0", until: later, proofKey: "flood"))
                #expect(try await !replicas[1].firstUse(of: "flood 2", until: later, proofKey: "other"))
                // Without a proof key (the old entry point): no quota.
                for index in 0..<5 { #expect(try await replicas[0].firstUse(of: "anonymous \(index)", until: later)) }
            }
        }

        /// A table made by an older Moose (no `holder` column) is upgraded on first use, additively: its
        /// rows are kept (still replays), and the quota applies from then on.
        @Test func aTableFromBeforeTheQuotaIsUpgradedInPlace() async throws {
            let schema = PG.freshSchema()
            defer { Task { await PG.dropSchema(schema) } }
            _ = try await PG.sql(PostgresQuery(unsafeSQL: "CREATE SCHEMA \"\(schema)\""))
            _ = try await PG.sql(
                PostgresQuery(
                    unsafeSQL: """
                        CREATE TABLE "\(schema)".dpop_proofs (digest bytea PRIMARY KEY CHECK (length(digest) = 32),
                            expires_at timestamptz NOT NULL)
                        """))
            let url = try PG.direct(schema: schema)
            let old = try PostgresDPoPReplayCache(url: url, maximumEntriesPerKey: 2)
            try await DPoPReplays.running([old]) {
                let later = Date().addingTimeInterval(300)
                // Recorded the old way first (as an older replica would), then checked with a key.
                #expect(try await old.firstUse(of: "flood 0", until: later))
                #expect(try await !old.firstUse(of: "flood 0", until: later, proofKey: "flood"))
                #expect(try await old.firstUse(of: "flood 1", until: later, proofKey: "flood"))
                #expect(try await old.firstUse(of: "flood 2", until: later, proofKey: "flood"))
                _ = try #require(
                    await Self.quotaRefusal { try await old.firstUse(of: "flood 3", until: later, proofKey: "flood") })
                #expect(try await old.firstUse(of: "other", until: later, proofKey: "other"))
            }
            let columns = try await PG.sql(
                "SELECT count(*)::int8 FROM pg_attribute WHERE attrelid = to_regclass(\("\"\(schema)\".dpop_proofs")) AND attname = 'holder'"
            )
            #expect(try columns.first?.decode(Int64.self) == 1)
            let indexes = try await PG.sql(
                "SELECT to_regclass(\("\"\(schema)\".dpop_proofs_holder")) IS NOT NULL")
            #expect(try indexes.first?.decode(Bool.self) == true)
        }
    }
}
#endif
