"""Reads rendered avatar frames with a face-landmark model that is not Confab's: dlib's 68-point shape
predictor (iBUG 300-W points, face_recognition_models) on the face its HOG detector finds in the first
frame (the largest). Prints one JSON object per frame, measures in pixels:

  gap      inner-lip opening at the middle (66.y - 62.y)
  upper    upper lip's thickness at the middle (62.y - 51.y)
  lower    lower lip's thickness at the middle (57.y - 66.y)
  chin     chin below the eyes' centre line (8.y - mean eye y)
  eyes     mean eye aspect ratio of both eyes ((|37-41| + |38-40|) / 2|36-39|)
  eye_span distance between the eyes' centres (the face's scale)
  upper_face (x, y) of the nose's tip (30) and of each eye's centre: the face above the mouth

Usage: face_judge.py FRAME.png...
"""

import json
import sys

import dlib
import face_recognition_models


def main(paths):
    detector = dlib.get_frontal_face_detector()
    predictor = dlib.shape_predictor(face_recognition_models.pose_predictor_model_location())
    first = dlib.load_rgb_image(paths[0])
    faces = sorted(detector(first, 1), key=lambda rect: rect.area(), reverse=True)
    if not faces:
        print(json.dumps({"error": "no face in the first frame"}))
        return 1
    face = faces[0]
    for path in paths:
        image = dlib.load_rgb_image(path)
        shape = predictor(image, face)
        p = [(shape.part(i).x, shape.part(i).y) for i in range(68)]

        def dist(a, b):
            return ((p[a][0] - p[b][0]) ** 2 + (p[a][1] - p[b][1]) ** 2) ** 0.5

        def eye(first):
            c = [first + i for i in range(6)]
            return (dist(c[1], c[5]) + dist(c[2], c[4])) / (2 * dist(c[0], c[3]))

        def centre(first):
            xs = [p[first + i][0] for i in range(6)]
            ys = [p[first + i][1] for i in range(6)]
            return sum(xs) / 6, sum(ys) / 6

        right, left = centre(36), centre(42)
        eyes_y = (right[1] + left[1]) / 2
        print(
            json.dumps(
                {
                    "gap": p[66][1] - p[62][1],
                    "upper": p[62][1] - p[51][1],
                    "lower": p[57][1] - p[66][1],
                    "chin": p[8][1] - eyes_y,
                    "eyes": (eye(36) + eye(42)) / 2,
                    "eye_span": ((right[0] - left[0]) ** 2 + (right[1] - left[1]) ** 2) ** 0.5,
                    "upper_face": [list(p[30]), list(right), list(left)],
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
