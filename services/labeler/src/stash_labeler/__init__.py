"""The labeler service: labels and scores every step, runs the trajectory PRM."""
