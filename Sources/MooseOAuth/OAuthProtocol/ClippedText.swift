extension String {
    /// The text as an error message quotes outside input: at most `count` characters, then "…" (a
    /// pasted URL, a method or a document's `kid` is not echoed whole).
    package func clipped(to count: Int) -> String {
        self.count > count ? String(prefix(count)) + "…" : self
    }
}
