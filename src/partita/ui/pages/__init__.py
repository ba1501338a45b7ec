"""The server-rendered pages: each module renders one area's templates."""
