import ImgdCore

/// A body that arrived whole, with what the response said about it: what the publisher needs to
/// validate it and give it its final name, moved off the transfer loop in one piece.
/// Its parts are values or owners of their own (the spill an actor, the reservation atomic), so
/// it crosses from the loop to a spill lane and the publisher's queue as it is.
final class ArrivedBody: Sendable {
    let url: ImageURL
    let key: CacheKey
    /// Identifies the job it belongs to, so a late result for a cancelled job is recognised.
    let jobSerial: UInt64
    /// Bytes not yet handed to `spill` (all of them, for a body that fit in memory).
    let buffer: [UInt8]
    /// The rest, written and hashed on a spill lane, for a body larger than the buffer.
    let spill: BodySpill?
    let bytes: Int
    /// The space held for this body; released once its row is committed (it is then counted as
    /// stored) or when it fails.
    let reservation: SpaceReservation
    let finalURL: String
    let status: Int
    let etag: String?
    let lastModified: String?
    let contentType: String?
    /// What the response's headers say about its lifetime (stored in the entry's row).
    let freshness: ResponseFreshness
    let duration: Duration
    let attempts: Int
    /// The digest the request named; a body with another is refused before it is published.
    let expectedSHA256: SHA256Digest?
    /// The mirror the body came from, when it was not the request's own URL.
    let servedBy: String?
    /// The uid a new entry is charged to (``Job/owner``); nil: unowned.
    let owner: UInt32?

    init(
        url: ImageURL, key: CacheKey, jobSerial: UInt64, buffer: [UInt8], spill: BodySpill?, bytes: Int,
        reservation: SpaceReservation, finalURL: String, status: Int, etag: String?, lastModified: String?,
        contentType: String?, duration: Duration, attempts: Int, expectedSHA256: SHA256Digest? = nil,
        freshness: ResponseFreshness = .none, servedBy: String? = nil, owner: UInt32? = nil
    ) {
        self.servedBy = servedBy
        self.owner = owner
        self.freshness = freshness
        self.url = url
        self.key = key
        self.jobSerial = jobSerial
        self.buffer = buffer
        self.spill = spill
        self.bytes = bytes
        self.reservation = reservation
        self.finalURL = finalURL
        self.status = status
        self.etag = etag
        self.lastModified = lastModified
        self.contentType = contentType
        self.duration = duration
        self.attempts = attempts
        self.expectedSHA256 = expectedSHA256
    }
}
