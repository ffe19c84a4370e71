import MooseJWT
import Testing

struct DurationTextTests {
    @Test func parsesWhatAPersonTypes() {
        #expect(DurationText.parse("60") == 60)
        #expect(DurationText.parse("0.5") == 0.5)
        #expect(DurationText.parse("90s") == 90)
        #expect(DurationText.parse("2m") == 120)
        #expect(DurationText.parse("1h") == 3600)
        #expect(DurationText.parse("1d") == 86_400)
        #expect(DurationText.parse("1h30m") == 5400)
        #expect(DurationText.parse("365d") == 31_536_000)
    }

    @Test func refusesAnythingElse() {
        for text in [
            "", "-5", "x", "5x", "1h30", "30m1h", "1m1m", "h", ".5", "5.", "1.5h", "366d", "99999999999999999999",
            "1e3", " 60", "60 ", "٣", "inf", "nan", String(repeating: "1", count: 40)
        ] {
            #expect(DurationText.parse(text) == nil, "\(text)")
        }
    }
}
