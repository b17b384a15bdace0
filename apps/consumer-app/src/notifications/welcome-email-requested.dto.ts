import { IsInt, IsString, Max, Min } from 'class-validator';

/** com.example.WelcomeEmailRequested as JSON (EVENT_FORMAT=json): the Avro record's fields, `userId` an Avro int. */
export class WelcomeEmailRequestedDto {
  @IsInt()
  @Min(-2147483648)
  @Max(2147483647)
  userId!: number;

  @IsString()
  email!: string;

  @IsString()
  requestedAt!: string;
}
