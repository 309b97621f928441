extension Duration {
    /// The duration in seconds, fractions included (for rates and progress lines).
    public var inSeconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
