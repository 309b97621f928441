/// What one list dropped in the spool may hold: the caps that keep a claim short and the state
/// database bounded (every line of a list is a row until the list falls out of the last
/// ``ListStore/keptFinishedLists`` finished ones).
public struct SpoolLimits: Sendable, Equatable {
    /// A list file larger than this when it is claimed is refused at once, unread, with a
    /// `bad_list` report in `failed/` (`max-list-bytes`; 1 GiB by default).
    public var maxListBytes = 1 << 30
    /// Entries (URLs and bad lines; comments and blank lines are not counted) read from one
    /// list, at most: the list gets a `bad_list` failure at the first entry past it and keeps
    /// what came before, as a list whose syntax breaks does (`max-list-lines`; 10,000,000 by
    /// default).
    public var maxListLines = 10_000_000
    /// Levels of sitemap indexes followed below a list (`sitemap-max-depth`; 2 by default): the
    /// children of an index dropped in the spool are level 1, theirs level 2; a child deeper
    /// than this is not fetched (a `bad_list` line names it).
    public var sitemapMaxDepth = 2
    /// Child sitemaps fetched for one list, at most, at every level together
    /// (`sitemap-max-children`; 1,000 by default); the rest are not fetched.
    public var sitemapMaxChildren = 1000

    public init() {}
}
