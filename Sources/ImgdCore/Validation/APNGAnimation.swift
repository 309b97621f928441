/// The APNG rules a decoder enforces, checked as the chunk walk passes acTL, fcTL, fdAT and
/// IDAT (APNG specification 1.0): acTL once, before the first IDAT, with at least one frame;
/// fcTL and fdAT numbered 0, 1, 2, … in file order; every frame inside the canvas, the one
/// before IDAT (the default image as first frame) exactly the canvas; each frame after IDAT
/// followed by its fdAT data; and as many fcTL chunks as acTL announced.
///
/// Pillow refuses files that break these; browsers show such a file's default image instead
/// of the animation. imgd refuses them as `corrupt`: the animation the file declares cannot be played.
///
/// A file whose animation is never declared is a still image, and its frame chunks are
/// unknown ancillary chunks that every decoder skips: no acTL before the first IDAT (none at
/// all, or one after it), or an acTL announcing 0 frames. A second acTL is skipped, as
/// libpng's APNG patch does. Refusing those would be a verdict no decoder gives.
struct APNGAnimation {
    private let canvasWidth: Int
    private let canvasHeight: Int
    /// acTL's num_frames, once read.
    private var declaredFrames: Int?
    /// Set when the file turns out to be a still image (see the type's notes): nothing more
    /// is checked.
    private var isStill = false
    private var frameControls = 0
    private var nextSequence = 0
    /// Set by an fcTL after IDAT until the first fdAT of its frame.
    private var frameAwaitingData: PNGChunk?

    init(canvasWidth: Int, canvasHeight: Int) {
        self.canvasWidth = canvasWidth
        self.canvasHeight = canvasHeight
    }

    /// Checks an APNG chunk (acTL, fcTL or fdAT; others are ignored) whose length
    /// `PNGChunkRules` already checked.
    mutating func check(_ chunk: PNGChunk, afterImageData: Bool) throws {
        guard !isStill else { return }
        if declaredFrames == nil, chunk.type == PNGChunk.frameControl || chunk.type == PNGChunk.frameData {
            // Frame chunks before any acTL: no animation is declared before them, so a decoder
            // shows the still image and skips them all.
            isStill = true
            return
        }
        switch chunk.type {
        case PNGChunk.animationControl:
            // A second acTL is skipped; one after the image data, or announcing no frame,
            // declares no animation.
            guard declaredFrames == nil else { return }
            let frames = chunk.uint32(at: 0)
            guard !afterImageData, frames >= 1 else {
                isStill = true
                return
            }
            declaredFrames = frames
        case PNGChunk.frameControl:
            try checkSequence(chunk)
            if !afterImageData, frameControls > 0 {
                throw PNGChunkRules.corrupt(chunk, "is a second fcTL before the image data, which is one frame")
            }
            if let waiting = frameAwaitingData {
                throw PNGChunkRules.corrupt(waiting, "starts a frame that has no fdAT data before the next fcTL")
            }
            try checkFrameRegion(chunk, afterImageData: afterImageData)
            frameControls += 1
            if afterImageData { frameAwaitingData = chunk }
        case PNGChunk.frameData:
            guard frameControls > 0 else {
                throw PNGChunkRules.corrupt(chunk, "comes before any fcTL chunk; frame data belongs to a frame")
            }
            try checkSequence(chunk)
            frameAwaitingData = nil
        default:
            break
        }
    }

    /// Checks what can only be known at IEND: every frame had its data, and acTL counted the frames.
    func finish() throws {
        guard !isStill, declaredFrames != nil else { return }
        if let waiting = frameAwaitingData {
            throw PNGChunkRules.corrupt(waiting, "starts a frame that has no fdAT data before IEND")
        }
        if let declaredFrames, declaredFrames != frameControls {
            throw ImageValidationError.corrupt(
                reason: "APNG's acTL announces \(declaredFrames) frames but the file has \(frameControls) fcTL chunks")
        }
    }

    private mutating func checkSequence(_ chunk: PNGChunk) throws {
        let sequence = chunk.uint32(at: 0)
        guard sequence == nextSequence else {
            throw PNGChunkRules.corrupt(
                chunk, "has sequence number \(sequence) where \(nextSequence) comes next: the frames are out of order")
        }
        nextSequence += 1
    }

    /// fcTL: sequence, width, height, x and y offset (4 bytes each), delay (2 + 2), dispose and blend ops.
    private func checkFrameRegion(_ chunk: PNGChunk, afterImageData: Bool) throws {
        let width = chunk.uint32(at: 4)
        let height = chunk.uint32(at: 8)
        let x = chunk.uint32(at: 12)
        let y = chunk.uint32(at: 16)
        guard width > 0, height > 0 else {
            throw PNGChunkRules.corrupt(chunk, "declares an empty \(width)×\(height) frame")
        }
        guard x + width <= canvasWidth, y + height <= canvasHeight else {
            throw PNGChunkRules.corrupt(
                chunk, "places a \(width)×\(height) frame at \(x),\(y), outside the \(canvasWidth)×\(canvasHeight) canvas")
        }
        if !afterImageData, frameControls == 0, width != canvasWidth || height != canvasHeight || x != 0 || y != 0 {
            throw PNGChunkRules.corrupt(
                chunk, "makes the default image a \(width)×\(height) frame at \(x),\(y); it must fill the canvas")
        }
        let dispose = chunk.head[24]
        let blend = chunk.head[25]
        guard dispose <= 2, blend <= 1 else {
            throw PNGChunkRules.corrupt(chunk, "has dispose op \(dispose) and blend op \(blend); APNG defines 0–2 and 0–1")
        }
    }
}
